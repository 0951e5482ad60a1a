"""References of the checks of chapter 11, "Tokens: byte-pair encoding"."""

from __future__ import annotations

import collections
from itertools import pairwise

from ..references import Case, Reference, lib, load, register

# --------------------------------------------------------------------------------------
# One merge of BPE training
# --------------------------------------------------------------------------------------
SENNRICH = {"low": 5, "lower": 2, "newest": 6, "widest": 3}  # Sennrich et al. (2016), fig. 1


def _byte_ids(word):
    """The byte-token ids of " word" (course_lib.bpe numbers the bytes as GPT-2 does)."""
    byte_id = {b: i for i, b in enumerate(load("bpe.BYTE_ORDER"))}
    return [byte_id[b] for b in (" " + word).encode()]


def _replace(piece, pair, new_id, every=True):
    out, i, done = [], 0, False
    while i < len(piece):
        if tuple(piece[i : i + 2]) == pair and not (done and not every):
            out.append(new_id)
            i, done = i + 2, True
        else:
            out.append(piece[i])
            i += 1
    return tuple(out)


def _merge_step(words, new_id, weighted=True, overlapping=True, smallest=True, every=True):
    """One merge of BPE training; the keywords are typical mistakes."""
    counts = collections.Counter()
    for piece, n in words.items():
        pairs = list(pairwise(piece))
        if not overlapping:  # each pair at most once per run of equal pairs
            pairs = [p for i, p in enumerate(pairs) if i == 0 or p != pairs[i - 1] or p[0] != p[1]]
        for pair in pairs:
            counts[pair] += n if weighted else 1
    sign = 1 if smallest else -1
    pair = max(counts, key=lambda p: (counts[p], -sign * p[0], -sign * p[1]))
    new_words = collections.Counter()
    for piece, n in words.items():
        new_words[_replace(piece, pair, new_id, every)] += n
    return pair, dict(new_words)


def _merge_step_with_the_library(words, new_id):
    """The right answer through course_lib.bpe's pair_counts and merge (off limits)."""
    counts = collections.Counter()
    for piece, n in words.items():
        lib("bpe.pair_counts")(list(piece), counts, n)
    pair = max(counts, key=lambda p: (counts[p], -p[0], -p[1]))
    return pair, {tuple(lib("bpe.merge")(list(p), pair, new_id)): n for p, n in words.items()}


def _merge_cases(g):
    toy = {tuple(_byte_ids(w)): n for w, n in SENNRICH.items()}
    return [
        Case("Sennrich's toy words, with a space before each", toy, 256),
        Case("a tie: two pairs of count 3", {(1, 2): 3, (3, 4): 3, (4, 3): 1}, 300),
        Case("the counts decide: (2, 1) occurs 4 times", {(1, 2, 1, 2): 1, (2, 1): 3}, 301),
        Case("a pair that overlaps itself", {(7, 7, 7): 2, (7, 8): 3}, 302),
        Case("the pair twice in one piece", {(5, 6, 9, 5, 6): 2, (6, 5): 1, (9, 9): 3}, 400),
    ]


register(
    "check_bpe_merge_step",
    Reference(
        cases=_merge_cases,
        hidden=lambda g: [
            Case("the counts decide", {(1, 2): 1, (2, 3, 2, 3): 1, (3, 4): 5}, 259),
            Case("a tie of three pairs", {(3, 1): 2, (2, 9): 2, (2, 5): 2}, 260),
            Case("overlaps and counts", {(4, 4, 4, 4): 1, (4, 5): 2, (5, 4, 4): 1}, 261),
        ],
        solution=_merge_step,
        mistakes=[
            lambda w, n: _merge_step(w, n, weighted=False),
            lambda w, n: _merge_step(w, n, overlapping=False),
            lambda w, n: _merge_step(w, n, smallest=False),
            lambda w, n: _merge_step(w, n, every=False),
        ],
        shortcuts=[_merge_step_with_the_library],
    ),
)


# --------------------------------------------------------------------------------------
# Encoding with learned merges
# --------------------------------------------------------------------------------------
def _encode(ids, merges, order="earliest", repeat=True, offset=256):
    """BPE encoding of one piece; `order`, `repeat` and `offset` name typical mistakes."""
    rank = {tuple(p): k for k, p in enumerate(merges)}
    ids = list(ids)
    while len(ids) > 1:
        present = [(i, p) for i, p in enumerate(pairwise(ids)) if p in rank]
        if not present:
            break
        if order == "leftmost":
            pair = present[0][1]
            ids = list(_replace(ids, pair, offset + rank[pair], every=False))
        else:
            pick = min if order == "earliest" else max
            pair = pick((p for _, p in present), key=rank.get)
            ids = list(_replace(ids, pair, offset + rank[pair]))
        if not repeat:
            break
    return ids


def _longest_match(ids, merges):
    """WordPiece's rule: the longest known token from the left (a typical mistake)."""
    token = {i: (i,) for i in range(256)}
    for k, (a, b) in enumerate(merges):
        token[256 + k] = token[a] + token[b]
    by_bytes = {v: k for k, v in token.items()}
    out, i, ids = [], 0, tuple(ids)
    while i < len(ids):
        j = max(j for j in range(i + 1, len(ids) + 1) if ids[i:j] in by_bytes)
        out.append(by_bytes[ids[i:j]])
        i = j
    return out


def _encode_with_the_library(ids, merges):
    """The right answer through course_lib.bpe's merge (off limits)."""
    rank = {tuple(p): k for k, p in enumerate(merges)}
    while len(ids) > 1 and any(p in rank for p in pairwise(ids)):
        pair = min((p for p in pairwise(ids) if p in rank), key=rank.get)
        ids = lib("bpe.merge")(list(ids), pair, 256 + rank[pair])
    return list(ids)


def _learned(text, num_merges):
    tok = lib("bpe.train_bpe")(text, num_merges)
    return tok.merges


_PROSE = (
    "The return value of the function is a list of the lines of the file. A list is a "
    "sequence; the function returns the list. Lists of lines are returned by the method "
    "readlines of a file object, and the lines keep their line ends. "
) * 3


def _encode_cases(g):
    toy = _learned(" low" * 5 + " lower" * 2 + " newest" * 6 + " widest" * 3, 8)
    prose = _learned(_PROSE, 60)
    return [  # the first three each tell one typical mistake from the others
        Case("the merge learned first wins", [11, 11, 10], [(11, 11), (11, 10)]),
        Case("the longest known token is not BPE's", [11, 11, 11], [(11, 11), (11, 256)]),
        Case("the earliest merge, wherever it is", [11, 10, 11, 10], [(11, 10), (256, 256), (256, 11)]),
        Case("' lowest' with the 8 merges of Sennrich's toy text", _byte_ids("lowest"), toy),
        Case("(b, c) was learned before (a, b)", [10, 11, 12], [(11, 12), (10, 11)]),
        Case(
            "a new token forms a learned pair with its neighbour",
            [10, 11, 12, 13],
            [(10, 11), (12, 13), (256, 257)],
        ),
        Case("a run of one byte", [7, 7, 7, 7, 7], [(7, 7), (256, 256)]),
        Case("' returned' with 60 merges of a prose text", _byte_ids("returned"), prose),
        Case("' readline' with the same merges", _byte_ids("readline"), prose),
        Case("no learned merge applies", [1, 2, 3], [(3, 2), (2, 2)]),
    ]


register(
    "check_bpe_encode",
    Reference(
        cases=_encode_cases,
        hidden=lambda g: [
            Case("' functions' with 60 merges of a prose text", _byte_ids("functions"), _learned(_PROSE, 60)),
            Case("the longest known token is not BPE's", [12, 12, 12], [(12, 12), (12, 256)]),
            Case("order and repetition", [5, 6, 7, 5, 6], [(6, 7), (5, 6), (5, 256), (258, 257)]),
        ],
        solution=_encode,
        mistakes=[
            _longest_match,
            lambda ids, merges: _encode(ids, merges, order="leftmost"),
            lambda ids, merges: _encode(ids, merges, order="latest"),
            lambda ids, merges: _encode(ids, merges, repeat=False),
            lambda ids, merges: _encode(ids, merges, offset=255),
        ],
        shortcuts=[_encode_with_the_library],
    ),
)
