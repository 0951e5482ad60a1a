"""Byte-level byte-pair encoding (BPE): the tokenizer of GPT-2, written out.

A language model reads a sequence of ids from a fixed vocabulary. Characters make long
sequences from a small vocabulary; words make short ones from a vocabulary that is never
complete. Byte-pair encoding (Sennrich et al., 2016) starts from the characters and learns the
most useful longer pieces from a training text. GPT-2 (Radford et al., 2019) starts from the 256
possible *bytes* of UTF-8 instead, so that every text, in any script, with any emoji, can be
written with the vocabulary: nothing is ever out of vocabulary.

Training, `train_bpe(text, num_merges)`:

    1. split the text into pieces with GPT-2's pattern (`pretokenize`): a word with the space
       before it, a number, a run of punctuation, a run of whitespace; no token crosses a piece;
    2. write every piece as its UTF-8 bytes, one base token per byte (256 of them);
    3. count each pair of adjacent tokens in all pieces (a piece that occurs n times counts n);
    4. merge the most frequent pair into a new token, id 256 + k for the k-th merge, in every
       piece (`merge`); ties go to the pair with the smallest ids;
    5. repeat 3-4 num_merges times.         vocabulary size = 256 + num_merges

Encoding a text, `BPE.encode`, splits it the same way and applies the learned merges to each
piece, always the earliest-learned merge that applies next; decoding, `BPE.decode`, joins the
tokens' bytes and reads them as UTF-8.

    >>> tok = train_bpe(" low" * 5 + " lower" * 2 + " newest" * 6 + " widest" * 3, num_merges=5)
    >>> [tok.decode(pair) for pair in tok.merges]       # the tokens the merges made, in order
    ['es', 'est', 'lo', ' lo', ' low']
    >>> tok.tokens(" lowest newer")                     # 'newer' was never seen: bytes
    [' low', 'est', ' ', 'n', 'e', 'w', 'e', 'r']
    >>> tok.decode(tok.encode("a text it never saw: ∑ 🙂")) == "a text it never saw: ∑ 🙂"
    True

Parity with Hugging Face `tokenizers` (tests/test_parity_bpe.py). Trained on the same text,
`tokenizers.Tokenizer(models.BPE())` with `pre_tokenizers.ByteLevel(add_prefix_space=False)` and
`trainers.BpeTrainer(vocab_size=256 + num_merges, initial_alphabet=ByteLevel.alphabet())` learns
the same merges in the same order and gives the same ids, because this module makes the same
three choices (read in tokenizers' source at v0.23.1, unchanged on its main branch since:
`tokenizers/src/models/bpe/trainer.rs` and `tokenizers/src/pre_tokenizers/byte_level.rs`):

* the pieces: GPT-2's regular expression, unchanged (no space is added before the text);
* the ids of the 256 bytes: GPT-2 shows each byte as a printable character (`BYTE_SYMBOL`: the
  space is 'Ġ', a newline 'Ċ') and `tokenizers` numbers the bytes in the order of those
  characters: the printable bytes '!'..'~', '¡'..'¬', '®'..'ÿ' first, then the other 68
  (`BYTE_ORDER`); GPT-2's own vocabulary starts the same way;
* ties: its trainer takes the pair with the highest count, and among equal counts the smallest
  (left id, right id); the k-th merge gets id 256 + k.

One case differs. When a merge makes a byte string that is already a token (`ab` + `c` after
`a` + `bc`), `tokenizers` gives it that token's id, so its vocabulary does not grow, and its
bookkeeping then merges the pair in only some of the pieces; this module gives every merge a new
id. The parity test checks that no such merge happens on the course's text, up to the last
possible merge.

Comparing language models over different tokens: a loss per token depends on what a token is;
the total -log2 p of a text divided by its number of characters does not (`bits_per_char`,
with `chars_per_id`).
"""

from __future__ import annotations

import heapq
import math
from collections import Counter, defaultdict
from itertools import pairwise

import regex
import torch

from . import train
from ._checks import check_int

__all__ = ["GPT2_PATTERN", "BYTE_SYMBOL", "BYTE_ORDER", "BPE", "pretokenize", "pair_counts", "merge",
           "token_text", "train_bpe",
           "chars_per_id", "bits_per_char"]

GPT2_PATTERN = regex.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
"""GPT-2's split (openai/gpt-2, src/encoder.py): contractions, a word with at most one space
before it, a number, a run of other symbols, and whitespace (a run of spaces keeps its last
space for the word that follows)."""


def _byte_symbols() -> dict[int, str]:
    """GPT-2's printable character for each byte: a printable byte stands for itself, the other
    68 (control characters, the space, ...) get the characters 256, 257, ... in byte order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    return {**{b: chr(b) for b in printable}, **{b: chr(256 + n) for n, b in enumerate(others)}}


BYTE_SYMBOL = _byte_symbols()                                  # byte -> printable character
BYTE_ORDER = sorted(range(256), key=lambda b: BYTE_SYMBOL[b])  # token id (< 256) -> byte
BYTE_ID = {b: i for i, b in enumerate(BYTE_ORDER)}             # byte -> token id


def pretokenize(text: str) -> list[str]:
    """Split text into the pieces that BPE never merges across (GPT2_PATTERN).

    >>> pretokenize("Hello world, it's 2024!\\n")
    ['Hello', ' world', ',', ' it', "'s", ' 2024', '!', '\\n']
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return GPT2_PATTERN.findall(text)


def pair_counts(ids: list[int], counts: Counter | None = None, weight: int = 1) -> Counter:
    """Count every pair of adjacent tokens of ids (overlapping pairs included: [7, 7, 7] holds
    the pair (7, 7) twice), each `weight` times, into `counts` (a new Counter if None)."""
    counts = Counter() if counts is None else counts
    for pair in pairwise(ids):
        counts[pair] += weight
    return counts


def merge(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace each occurrence of `pair` in ids by new_id, from left to right.

    >>> merge([5, 6, 5, 6, 6], (5, 6), 300)
    [300, 300, 6]
    >>> merge([7, 7, 7], (7, 7), 301)     # the first two; the last 7 has no partner left
    [301, 7]
    """
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def token_text(token: bytes) -> str:
    """A token's text, or, where its bytes are not whole UTF-8 characters, the bytes in hex:
    b' the' -> ' the', b'\\xf0\\x9f' (half of an emoji) -> '<f0><9f>'."""
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError:
        return "".join(f"<{b:02x}>" for b in token)


def train_bpe(text: str, num_merges: int) -> BPE:
    """Learn num_merges merges from text (the algorithm of the module's docstring).

    The pieces of the text are counted once; each merge then rewrites only the pieces that hold
    its pair and updates the counts of the pairs in them. A heap holds (-count, pair) for each
    count a pair has had; an entry whose count is no longer the pair's is skipped when it comes
    up. Stops early if no pair is left (every piece is one token).
    """
    check_int("num_merges", num_merges, minimum=0)
    words = Counter(pretokenize(text))                          # piece -> occurrences
    pieces = [[BYTE_ID[b] for b in w.encode("utf-8")] for w in words]
    weights = list(words.values())
    counts, holders = Counter(), defaultdict(set)               # pair -> count, pieces holding it
    for i, ids in enumerate(pieces):
        pair_counts(ids, counts, weights[i])
        for pair in pairwise(ids):
            holders[pair].add(i)
    heap = [(-n, pair) for pair, n in counts.items()]
    heapq.heapify(heap)
    merges = []
    while len(merges) < num_merges and heap:
        n, pair = heapq.heappop(heap)
        if -n != counts[pair]:
            continue                                            # an out-of-date entry
        new_id = 256 + len(merges)
        merges.append(pair)
        changed = set()
        for i in holders.pop(pair):
            ids, new = pieces[i], merge(pieces[i], pair, new_id)
            if len(new) == len(ids):
                continue                                        # the pair left this piece earlier
            for old_pair in pairwise(ids):
                counts[old_pair] -= weights[i]
            for new_pair in pairwise(new):
                counts[new_pair] += weights[i]
                holders[new_pair].add(i)
            changed.update(pairwise(ids), pairwise(new))
            pieces[i] = new
        for p in changed:
            if counts[p] > 0:
                heapq.heappush(heap, (-counts[p], p))
    return BPE(merges)


class BPE:
    """A byte-level BPE tokenizer: the merges learned by `train_bpe`, in the order learned.

    merges[k] = (left id, right id) makes token 256 + k; vocab[id] is the bytes of token id.
    encode(text) -> ids; decode(ids) -> text; tokens(text) -> the tokens as strings.
    `BPE(merges[:k])` is the tokenizer after k merges (training is greedy: the first k merges of
    a longer run are those of a run of k merges).
    """

    def __init__(self, merges):
        self.merges = [tuple(pair) for pair in merges]
        self.vocab = [bytes([b]) for b in BYTE_ORDER]               # the 256 base tokens
        for k, (a, b) in enumerate(self.merges):
            if not (0 <= a < 256 + k and 0 <= b < 256 + k):
                raise ValueError(f"merges[{k}] = {(a, b)} uses an id that does not exist yet "
                                 f"(ids 0..{256 + k - 1} exist before merge {k})")
            self.vocab.append(self.vocab[a] + self.vocab[b])
        self.rank = {pair: 256 + k for k, pair in enumerate(self.merges)}  # pair -> its new id
        self._cache = {}                                            # piece -> ids

    def __len__(self) -> int:
        """The vocabulary size, 256 + len(merges)."""
        return len(self.vocab)

    def __repr__(self) -> str:
        return f"BPE({len(self.merges)} merges, {len(self)} tokens)"

    def encode_piece(self, piece: str) -> list[int]:
        """The ids of one piece: its bytes, then, as long as some learned merge applies, the
        earliest-learned one (everywhere in the piece, `merge`)."""
        ids = [BYTE_ID[b] for b in piece.encode("utf-8")]
        while len(ids) > 1:
            pair = min(pairwise(ids), key=lambda p: self.rank.get(p, float("inf")))
            if pair not in self.rank:
                break                                               # no learned merge applies
            ids = merge(ids, pair, self.rank[pair])
        return ids

    def encode(self, text: str) -> list[int]:
        """text -> token ids: each piece of `pretokenize(text)` encoded (and remembered)."""
        ids = []
        for piece in pretokenize(text):
            if piece not in self._cache:
                self._cache[piece] = self.encode_piece(piece)
            ids.extend(self._cache[piece])
        return ids

    def decode(self, ids) -> str:
        """Token ids -> text: the tokens' bytes joined and read as UTF-8 (a byte sequence that
        is not valid UTF-8, e.g. half a character, becomes '�')."""
        ids = list(ids)
        bad = [i for i in ids if not (isinstance(i, int) and 0 <= i < len(self.vocab))]
        if bad:
            raise ValueError(f"ids must be ints in [0, {len(self.vocab)}), got {bad[:5]}")
        return b"".join(self.vocab[i] for i in ids).decode("utf-8", errors="replace")

    def tokens(self, text: str) -> list[str]:
        """The tokens of text as strings (`token_text`: part of a character shows its bytes)."""
        return [token_text(self.vocab[i]) for i in self.encode(text)]

    def symbols(self, i: int) -> str:
        """Token i written with GPT-2's printable characters (' the' -> 'Ġthe'), the strings
        of `tokenizers`' vocabulary."""
        return "".join(BYTE_SYMBOL[b] for b in self.vocab[i])


# ---------------------------------------------------------------------------
# Comparing language models over different tokens: bits per character
# ---------------------------------------------------------------------------

def chars_per_id(tokenizer: BPE) -> list[int]:
    """For each token id, the number of characters that begin in it: its bytes that are not
    UTF-8 continuation bytes (0b10xxxxxx). Summed over the tokens of a text: len(text)."""
    return [sum((b & 0xC0) != 0x80 for b in token) for token in tokenizer.vocab]


def bits_per_char(model, ids, chars, seq_len: int) -> float:
    """Held-out bits per character of a language model over any tokens:

        bpc = sum over predicted tokens of -log2 p(token | the tokens before it in its window)
              / the number of characters those tokens hold

    ids: (N,) the held-out text's token ids; chars: (V,) the characters each token holds
    (`chars_per_id`; all ones for characters); the text is read as `train.lm_heldout_loss`
    reads it, in windows of seq_len + 1 tokens, each predicted token once. Tokens of several
    characters make a model's bits per *token* larger and its bits per character comparable.
    """
    ids, chars = torch.as_tensor(ids), torch.as_tensor(chars)
    n = (len(ids) - 1) // seq_len * seq_len                      # tokens predicted
    nats = train.lm_heldout_loss(model, ids, seq_len=seq_len) * n  # their total, in nats
    return nats / math.log(2) / chars[ids[1:n + 1]].sum().item()
