"""Explorer of the chapter "Tokens": a sentence split into BPE tokens as the merges grow.

    TokensExplorer   number of merges, sentence -> the sentence's tokens, their count, the
                     vocabulary size, and the characters per token of held-out text

The tokenizer after k merges is the first k merges of one trained tokenizer (`bpe.BPE`,
whose docstring says why that is the same as training k merges), so every frame is computed
here, when the explorer is built, and the page switches between them with no kernel.
"""

from __future__ import annotations

import traitlets

from ..bpe import BPE, token_text
from .base import Explorer, _stat

__all__ = ["MERGE_OPTIONS", "SENTENCES", "TokensExplorer", "tokens_frame", "chars_per_token"]

MERGE_OPTIONS = [0, 4, 16, 64, 256, 1024, 4096]
SENTENCES = [
    "The return value of the function is a list of strings.",
    "for key, value in sorted(mapping.items()):",
    "Tokenisers see «naïve» words and emoji 🙂 as bytes.",
]


def chars_per_token(tokenizer: BPE, text: str) -> float:
    """len(text) / len(tokenizer.encode(text)): how many characters a token holds on average."""
    return len(text) / max(len(tokenizer.encode(text)), 1)


def tokens_frame(tokenizer: BPE, sentence: str, heldout_ratio: float, curve: list[float],
                 highlight: int) -> dict:
    """One frame: the sentence's tokens (strings and ids), its statistics, and the held-out
    compression of every option (`curve`, one value per MERGE_OPTIONS) with this one marked."""
    ids = tokenizer.encode(sentence)
    return {
        "tokens": {"tokens": [token_text(tokenizer.vocab[i]) for i in ids], "ids": ids},
        "compression": {"values": [round(v, 4) for v in curve], "highlight": highlight,
                        "labels": [str(k) for k in MERGE_OPTIONS]},
        "stats": [
            _stat("num_tokens", "tokens in the sentence", len(ids), 0),
            _stat("sentence_chars_per_token", "characters per token, this sentence",
                  len(sentence) / max(len(ids), 1), 2),
            _stat("vocab_size", "vocabulary size (256 bytes + merges)", len(tokenizer), 0),
            _stat("heldout_chars_per_token", "characters per token, held-out text", heldout_ratio, 3),
        ],
    }


class TokensExplorer(Explorer):
    """Move the number of merges; see a sentence split into tokens.

    tokenizer: a trained `bpe.BPE` with at least max(MERGE_OPTIONS) merges; heldout: text it was
    not trained on (the compression panel); sentences: the sentences to choose from.
    Traits set by the controls: ``merges`` (one of MERGE_OPTIONS) and ``sentence`` (an index).
    """

    merges = traitlets.Int(256).tag(sync=True)
    sentence = traitlets.Int(0).tag(sync=True)

    def __init__(self, tokenizer: BPE, heldout: str, sentences=SENTENCES, merges=256, sentence=0,
                 **kwargs):
        if not isinstance(tokenizer, BPE):
            raise TypeError(f"tokenizer must be a course_lib.bpe.BPE, got {type(tokenizer).__name__}")
        if len(tokenizer.merges) < max(MERGE_OPTIONS):
            raise ValueError(f"tokenizer has {len(tokenizer.merges)} merges; the explorer needs "
                             f"at least {max(MERGE_OPTIONS)} (the largest option)")
        if not isinstance(heldout, str) or not heldout:
            raise ValueError("heldout must be a non-empty str (text the tokenizer was not trained on)")
        sentences = list(sentences)
        if not sentences or not all(isinstance(s, str) and s for s in sentences):
            raise ValueError(f"sentences must be non-empty strings, got {sentences!r}")
        tokenizers = {k: BPE(tokenizer.merges[:k]) for k in MERGE_OPTIONS}
        curve = [chars_per_token(tokenizers[k], heldout) for k in MERGE_OPTIONS]
        controls = [
            {"name": "merges", "label": "merges", "kind": "slider", "options": MERGE_OPTIONS},
            {"name": "sentence", "label": "sentence", "kind": "select",
             "options": list(range(len(sentences))), "labels": sentences},
        ]
        panels = [
            {"kind": "tokens", "key": "tokens", "title": "the sentence, one box per token "
             "(· a space, ⏎ a line end, <f0> a byte that is part of a character)"},
            {"kind": "bars", "key": "compression", "title": "characters per token of held-out text, "
             "against the number of merges", "ymin": 0.0},
            {"kind": "stats", "key": "stats", "title": "this tokenizer"},
        ]

        def frame(merges, sentence):
            k = MERGE_OPTIONS.index(merges)
            return tokens_frame(tokenizers[merges], sentences[sentence], curve[k], curve, k)

        spec = self.build_spec(
            "tokens", "Byte-pair encoding: a sentence as the merges grow", controls, panels, frame,
            caption="0 merges: one token per byte (UTF-8). Each merge adds one token to the "
                    "vocabulary, the most frequent pair of the training text at that point.")
        super().__init__(spec=spec, merges=merges, sentence=sentence, **kwargs)
