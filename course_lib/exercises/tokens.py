"""Checks for chapter 11, "Tokens: byte-pair encoding"."""

from __future__ import annotations

from ._compare import within
from ._engine import Check, Mistake, Prediction
from ._forbid import Forbidden

# What the learner writes here, course_lib.bpe does: none of it may be called.
_BPE = tuple(Forbidden(f"course_lib.bpe.{name}") for name in
             ("train_bpe", "merge", "pair_counts", "BPE.encode_piece", "BPE.encode"))


def _same_ids(got, expected):
    """Exact comparison of a list of token ids, both shown."""
    if not isinstance(got, (list, tuple)) or not all(isinstance(i, int) for i in got):
        return f"expected a list of ints (token ids), got {type(got).__name__}: {got!r:.80}"
    if list(got) != list(expected):
        return f"expected the ids {list(expected)}, got {list(got)}."
    return None


# --------------------------------------------------------------------------------------
# One merge of BPE training
# --------------------------------------------------------------------------------------
check_bpe_merge_step = Check(
    "check_bpe_merge_step",
    "fn(words {tuple of ids: count}, new_id) -> (pair, {tuple of ids: count}): the most frequent "
    "adjacent pair (counts weighted by the pieces' counts; ties to the smallest pair) and the "
    "pieces with every occurrence of it replaced by new_id, left to right",
    params=("words", "new_id"),
    outputs=("the pair merged", "the pieces after the merge"),
    mistakes=[
        Mistake("each piece is counted once: a piece that occurs n times in the text holds its "
                "pairs n times (multiply by the count)."),
        Mistake("a pair that overlaps itself is counted once: in (7, 7, 7) the pair (7, 7) "
                "occurs twice (at positions 0 and 1), although only one of them can be merged."),
        Mistake("the tie goes to the wrong pair: among pairs of equal count, take the smallest "
                "(compare the tuples)."),
        Mistake("only the first occurrence in each piece is replaced: replace every one, from "
                "left to right."),
    ],
    hints=["Two passes: count the pairs of every piece (times the piece's count), then rewrite "
           "every piece.",
           "A key for max that prefers the larger count and then the smaller pair: "
           "(count, -a, -b).",
           "Rewrite a piece with an index i: if (piece[i], piece[i + 1]) is the pair, append "
           "new_id and jump by 2, else append piece[i] and step by 1."],
    forbidden=_BPE,
)


# --------------------------------------------------------------------------------------
# Encoding with learned merges
# --------------------------------------------------------------------------------------
check_bpe_encode = Check(
    "check_bpe_encode",
    "fn(ids list of ints (one piece), merges list of pairs, merge k making id 256 + k) -> list of "
    "ints: the earliest-learned applicable merge applied everywhere, repeatedly, until none applies",
    params=("ids", "merges"),
    compare=_same_ids,
    mistakes=[
        Mistake("this is the longest known token from the left (WordPiece's rule): BPE applies "
                "the merges in the order they were learned, which can cut the same bytes "
                "differently."),
        Mistake("the pairs are merged from left to right as they come: among the pairs present, "
                "merge the one learned EARLIEST first, wherever it is."),
        Mistake("the merge learned LAST is applied first: training applied them in the order "
                "learned, and encoding must too."),
        Mistake("only one merge was applied: repeat until no learned merge applies (a new token "
                "can form a pair with its neighbour that is itself a learned merge)."),
        Mistake("the new ids are off: merge k (counting from 0) makes token 256 + k."),
    ],
    hints=["A dict from pair to its position in merges says both whether a pair is a learned "
           "merge and how early it was learned.",
           "Loop: among the adjacent pairs that are learned merges, take the one with the "
           "smallest position k; replace all its occurrences by 256 + k; stop when no pair is "
           "a learned merge."],
    forbidden=_BPE,
)


# --------------------------------------------------------------------------------------
# Predict, then measure: compression on code
# --------------------------------------------------------------------------------------
check_code_compression_prediction = Prediction(
    "check_code_compression_prediction",
    "your prediction of the characters per token that the chapter's BPE tokenizer with a "
    "vocabulary of 1024, trained on documentation prose, reaches on the source code of Python's "
    "json package, against the measurement",
    quantity="characters per token of the vocabulary-1024 tokenizer on the json package's source",
    tolerance=within(rel=0.15), example=2.3,
    explanation=("A tokenizer compresses best the kind of text it was trained on. The help pages "
                 "hold indented code examples, so runs of spaces and keywords such as ' def' and "
                 "' return' are single tokens; but real source code is full of what prose rarely "
                 "has: names joined by underscores (skipkeys, _default_encoder), keyword arguments, "
                 "brackets and quotes, which are cut into short pieces. So code takes more tokens "
                 "per character than held-out prose, yet far fewer than one per character: the "
                 "common words and symbols are still merged."),
    mistakes=[
        Mistake("code is not prose, but a BPE tokenizer still merges what it knows: keywords, "
                "common identifiers, runs of spaces; it never falls back to one token per "
                "character for ASCII text it has seen pieces of.",
                lambda measured: 1.0),
        Mistake("this is about the compression of held-out prose: a tokenizer compresses best "
                "the kind of text it was trained on; on code, whose pieces are rarer in its "
                "training text, it needs more tokens.",
                lambda measured: 2.9),
    ],
    hints=["Which pieces of Python code are frequent in documentation, and which are not?",
           "Start from the held-out prose's characters per token and decide which way each "
           "difference moves it: indentation, long names joined by underscores, brackets and "
           "quotes."],
)
