"""Assignment 3's public pieces (not solutions): the split of a text into the pieces that BPE
never merges across (:func:`pieces`), the course text's splits (:func:`course_text`), the
stretch of training text the tokenizer is trained on (:func:`bpe_training_text`), a tiny causal
language model the checks run the learner's code on (:class:`ToyLM`), the goal's measurement
(:func:`heldout_bits_per_char`), and what the assignment's parts may not call (``MODEL``,
``BPE``). The checks' records are in ``a3.py`` (the tokenizer, the model, generation) and
``a3_train.py`` (training, bits per character, sampling, the goal); ``a3.py`` re-exports every
public name.
"""

from __future__ import annotations

import math
import re
from functools import cache

import torch
from torch import nn

from ._compare import describe
from ._forbid import Forbidden
from ._record import WrongResult

__all__ = ["BPE", "MODEL", "PIECE", "SDPA_ATEN", "ToyLM", "bpe_training_text", "course_text",
           "heldout_bits_per_char", "pieces", "test_windows"]

# --------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------
PIECE = re.compile(r" ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+")
"""A word with the space before it, a number, a run of other symbols, a run of whitespace (a
run of spaces before a word leaves its last space to the word). Every character of a text falls
in exactly one piece: ``"".join(pieces(text)) == text``."""


def pieces(text: str) -> list[str]:
    """The pieces of ``text`` that byte-pair encoding never merges across (:data:`PIECE`).

    >>> pieces("The list  [1, 2]\\n")
    ['The', ' list', ' ', ' [', '1', ',', ' 2', ']', '\\n']
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return PIECE.findall(text)


@cache
def course_text(split: str) -> str:
    """The course's text (CPython's help pages, ``course_lib.data.load_text``), split 90/5/5 into
    "train", "val" and "test" by ``course_lib.data.split_text``: the same split as
    ``course_lib.data.char_corpus()``, as text rather than character ids."""
    from course_lib.data import load_text, split_text

    names = ("train", "val", "test")
    if split not in names:
        raise ValueError(f"split must be one of {names}, got {split!r}")
    return split_text(load_text())[names.index(split)]


def bpe_training_text(seed: int, n_chars: int = 150_000) -> str:
    """``n_chars`` consecutive characters of the training split, from a position drawn from
    ``seed`` (the assignment passes its variant's seed): the text the tokenizer is trained on."""
    train = course_text("train")
    if not 0 < n_chars <= len(train):
        raise ValueError(f"n_chars must be in 1..{len(train)}, got {n_chars}")
    g = torch.Generator().manual_seed(seed)
    start = int(torch.randint(0, len(train) - n_chars + 1, (1,), generator=g))
    return train[start:start + n_chars]


def test_windows(seed: int, n: int = 12, n_chars: int = 800) -> list[str]:
    """``n`` windows of ``n_chars`` characters of the TEST split, each starting at the start of a
    line, at positions drawn from ``seed`` (no two windows overlap)."""
    text = course_text("test")
    starts = [0] + [m.end() for m in re.finditer("\n", text[: len(text) - n_chars])]
    g = torch.Generator().manual_seed(seed)
    chosen: list[int] = []
    for i in torch.randperm(len(starts), generator=g).tolist():
        if all(abs(starts[i] - s) >= n_chars for s in chosen):
            chosen.append(starts[i])
        if len(chosen) == n:
            break
    return [text[s:s + n_chars] for s in sorted(chosen)]


# --------------------------------------------------------------------------------------
# A tiny causal language model the checks run the learner's code on (not a GPT)
# --------------------------------------------------------------------------------------
class ToyLM(nn.Module):
    """A small causal language model with a context of ``block_size`` tokens: each position reads
    its own token, its position and the mean of the embeddings of the tokens up to it.

        e_t = embed[x_t] + place[t];  c_t = mean(e_1..e_t);  logits_t = unembed(norm(e_t + tanh(mix(c_t))))

    ``unembed`` is tied to ``embed``. ``ids (B, T)`` with ``T <= block_size`` -> logits ``(B, T, V)``.
    """

    def __init__(self, vocab_size: int, block_size: int, width: int = 8):
        super().__init__()
        self.block_size = block_size
        self.embed = nn.Embedding(vocab_size, width)
        self.place = nn.Embedding(block_size, width)
        self.mix = nn.Linear(width, width)
        self.norm = nn.LayerNorm(width)
        self.unembed = nn.Linear(width, vocab_size, bias=False)
        self.unembed.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        length = ids.shape[-1]
        if length > self.block_size:
            raise ValueError(f"ToyLM reads at most block_size={self.block_size} tokens, got {length}")
        e = self.embed(ids) + self.place(torch.arange(length))                 # (B, T, C)
        c = e.cumsum(1) / torch.arange(1, length + 1)[:, None]                 # (B, T, C)
        return self.unembed(self.norm(e + torch.tanh(self.mix(c))))           # (B, T, V)


# --------------------------------------------------------------------------------------
# The goal's measurement (public: it reads the learner's model and tokenizer, nothing typed)
# --------------------------------------------------------------------------------------
def _parts(obj):
    """(model, tokenizer) from a pair, or from an object with .model and .tokenizer."""
    if isinstance(obj, (tuple, list)) and len(obj) == 2:
        model, tokenizer = obj
    elif hasattr(obj, "model") and hasattr(obj, "tokenizer"):
        model, tokenizer = obj.model, obj.tokenizer
    else:
        raise WrongResult("pass (model, tokenizer): your trained GPT and your Tokenizer, e.g. "
                          f"check_a3_heldout_bpc((model, tokenizer)); got {type(obj).__name__}.")
    if model is None or tokenizer is None:
        raise NotImplementedError("train the model (and the tokenizer) first")
    if not isinstance(model, nn.Module):
        raise WrongResult(f"the first of the pair must be your GPT (an nn.Module), got "
                          f"{type(model).__name__}.")
    if not (callable(getattr(tokenizer, "encode", None)) and callable(getattr(tokenizer, "decode", None))):
        raise WrongResult("the second of the pair must be your Tokenizer, with encode(text) and "
                          f"decode(ids); got {type(tokenizer).__name__}.")
    block = getattr(model, "block_size", None)
    if not isinstance(block, int) or block < 2:
        raise WrongResult("your GPT must keep its context length as an int attribute block_size, "
                          f"got {block!r}.")
    return model, tokenizer, block


def _chunk_logits(model, x: torch.Tensor) -> torch.Tensor:
    """The model's logits (1, T, V) for x (1, T), refusing a model that reads later tokens."""
    logits = model(x)
    if not isinstance(logits, torch.Tensor) or logits.dim() != 3 or logits.shape[:2] != x.shape:
        raise WrongResult(f"your GPT must map ids (B, T) = {tuple(x.shape)} to logits (B, T, V), "
                          f"got {describe(logits)}.")
    T = x.shape[1]
    if T > 1:  # causal: changing the tokens after position cut must not change the logits up to it
        cut = T // 2
        other = x.clone()
        other[0, cut + 1:] = (x[0, cut + 1:] + 1) % logits.shape[-1]
        if not torch.allclose(model(other)[0, :cut + 1], logits[0, :cut + 1], atol=1e-5, rtol=1e-4):
            raise WrongResult("your GPT's outputs at a position change when LATER tokens change: "
                              "its attention reads the future, so its bits per character would "
                              "be meaningless. Mask the scores of later positions.")
    return logits


def heldout_bits_per_char(obj, seed: int, n: int = 12, n_chars: int = 800) -> float:
    """The bits per character of a trained (model, tokenizer) on ``n`` windows of the test split
    drawn from ``seed`` (:func:`test_windows`).

    Each window is encoded by the learner's tokenizer, which must give the window back when
    decoding (else the count of characters would be wrong). Its tokens are read in consecutive
    chunks of the model's ``block_size``: every token but the window's first is predicted from
    the tokens before it in its chunk. The sum of -log2 p over the predicted tokens is divided by
    the number of characters they hold: the window's characters less those of its first token.
    """
    model, tokenizer, block = _parts(obj)
    was_training = model.training
    model.eval()
    bits, chars = 0.0, 0
    try:
        with torch.no_grad():
            for window in test_windows(seed, n, n_chars):
                ids = list(tokenizer.encode(window))
                if tokenizer.decode(ids) != window:
                    raise WrongResult("decode(encode(text)) is not the text on a held-out window: "
                                      f"{window[:60]!r}... The tokenizer must be lossless.")
                if len(ids) < 2 or not all(isinstance(i, int) and i >= 0 for i in ids):
                    raise WrongResult("encode(text) must return a list of token ids (ints >= 0) "
                                      "with at least two tokens for a window of text.")
                tokens = torch.tensor(ids)
                for start in range(0, len(ids) - 1, block):
                    x = tokens[start:start + block][None]                     # (1, T)
                    y = tokens[start + 1:start + block + 1]                   # (T',) T' <= T
                    logits = _chunk_logits(model, x)[0, : len(y)]       # (T', V)
                    if int(tokens.max()) >= logits.shape[-1]:
                        raise WrongResult(f"the tokenizer made id {int(tokens.max())}, but the "
                                          f"model scores {logits.shape[-1]} ids.")
                    logp = torch.log_softmax(logits.double(), -1)
                    bits -= float(logp.gather(1, y[:, None]).sum()) / math.log(2)
                chars += len(window) - len(tokenizer.decode(ids[:1]))
    finally:
        model.train(was_training)
    return bits / chars


# --------------------------------------------------------------------------------------
# What the parts may not call
# --------------------------------------------------------------------------------------
SDPA_ATEN = ("scaled_dot_product_attention", "_scaled_dot_product_attention_math",
              "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention",
              "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
              "_native_multi_head_attention", "_transformer_encoder_layer_fwd")
MODEL = (
    Forbidden("course_lib.gpt"), Forbidden("course_lib.multihead"),
    Forbidden("course_lib.attention"), Forbidden("course_lib.transformer"),
    Forbidden("torch.nn.MultiheadAttention"), Forbidden("torch.nn.Transformer"),
    Forbidden("torch.nn.TransformerEncoderLayer"), Forbidden("torch.nn.TransformerDecoderLayer"),
    Forbidden("torch.nn.TransformerEncoder"), Forbidden("torch.nn.TransformerDecoder"),
    Forbidden(label="F.scaled_dot_product_attention", aten=SDPA_ATEN),
)
BPE = (Forbidden("course_lib.bpe"), Forbidden("tokenizers", label="the Hugging Face tokenizers library"))
