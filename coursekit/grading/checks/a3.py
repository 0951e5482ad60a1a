"""References of assignment 3, "A GPT end to end": the solutions from tensor operations, the
typical mistakes, the shortcuts that must be refused, and the cases. Here parts 1 and 2 (byte-pair
encoding, the model); parts 3 and 4 (the schedule, the optimiser, one step, bits per character)
in ``a3_train.py``; parts 5 and 6 (cached generation, nucleus sampling) and the goal in
``a3_generate.py``.
"""

from __future__ import annotations

import math
from collections import Counter
from itertools import pairwise
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from course_lib.exercises.a3 import course_text, pieces

from ..references import Case, Reference, load, register


# ======================================================================================
# Part 1: byte-pair encoding
# ======================================================================================
def _replace(word, pair, new_id):
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def train_bpe(text, vocab_size, weighted=True, split=True, tie="smallest", offset=256):
    """The reference; the keywords are the typical mistakes."""
    parts = pieces(text) if split else [text]
    words = Counter(tuple(p.encode("utf-8")) for p in parts)
    if not weighted:
        words = Counter(dict.fromkeys(words, 1))
    merges = []
    n_merges = vocab_size - offset
    while len(merges) < n_merges:
        pairs = Counter()
        for word, n in words.items():
            for a, b in pairwise(word):
                pairs[a, b] += n
        if not pairs:
            break
        top = max(pairs.values())
        tied = [p for p, n in pairs.items() if n == top]
        pair = min(tied) if tie == "smallest" else max(tied)
        new_id = 256 + len(merges)
        merges.append(pair)
        merged = Counter()
        for word, n in words.items():
            merged[_replace(word, pair, new_id)] += n
        words = merged
        if not weighted:
            words = Counter(dict.fromkeys(words, 1))
    return merges


def _bpe_train_mistakes():
    return [
        lambda t, v: train_bpe(t, v, weighted=False),
        lambda t, v: train_bpe(t, v, split=False),
        lambda t, v: train_bpe(t, v, tie="largest"),
        lambda t, v: train_bpe(t, v, offset=0),
    ]


def _bpe_shortcut(text, vocab_size):
    return list(load("bpe.train_bpe")(text, vocab_size - 256).merges)


_TEXTS = [
    "the cat sat on the mat; the cat ate the rat.\n" * 3,
    "aaaa aaa aa a  bbb\n\nbbb aaab",
    "x = [1, 2, 3]  # café café\n    return x\n",
]


def _bpe_train_cases(g):
    text = course_text("train")
    start = int(torch.randint(0, len(text) - 3000, (1,), generator=g))
    return [  # the first case is drawn from the variant's seed: two variants differ there
        Case("3000 characters of the course's training text, 60 merges", text[start : start + 3000], 316),
        Case("a short repeated sentence, 12 merges", _TEXTS[0], 268),
        Case("ties, runs of one letter and of spaces, 8 merges", _TEXTS[1], 264),
        Case("code with non-ASCII letters, more merges than pairs", _TEXTS[2], 300),
    ]


register(
    "check_a3_bpe_train",
    Reference(
        seed=31,
        cases=_bpe_train_cases,
        solution=train_bpe,
        mistakes=_bpe_train_mistakes(),
        shortcuts=[_bpe_shortcut],
    ),
)


class Tokenizer:
    """The reference tokenizer; the class attributes are the typical mistakes."""

    leftmost = False
    split = True
    per_token_decode = False
    one_round = False

    def __init__(self, merges):
        self.merges = [tuple(p) for p in merges]
        self.rank = {pair: k for k, pair in enumerate(self.merges)}
        self.vocab = [bytes([b]) for b in range(256)]
        for a, b in self.merges:
            self.vocab.append(self.vocab[a] + self.vocab[b])
        self.cache = {}

    def encode_piece(self, piece):
        ids = list(piece.encode("utf-8"))
        present = None
        while len(ids) > 1:
            pairs = [p for p in pairwise(ids) if p in self.rank]
            if self.one_round:
                present = sorted(set(pairs), key=self.rank.get) if present is None else present
                if not present:
                    break
                pair = present.pop(0)
            elif not pairs:
                break
            else:
                pair = pairs[0] if self.leftmost else min(pairs, key=self.rank.get)
            ids = list(_replace(ids, pair, 256 + self.rank[pair]))
        return ids

    def encode(self, text):
        ids = []
        for piece in pieces(text) if self.split else [text]:
            if piece not in self.cache:
                self.cache[piece] = self.encode_piece(piece)
            ids.extend(self.cache[piece])
        return ids

    def decode(self, ids):
        if self.per_token_decode:
            return "".join(self.vocab[i].decode("utf-8", errors="replace") for i in ids)
        return b"".join(self.vocab[i] for i in ids).decode("utf-8", errors="replace")


def _variant(base, **flags):
    return type(f"{base.__name__}Mistake", (base,), flags)


class _LibraryTokenizer:
    """A shortcut: course_lib's BPE behind the learner's interface."""

    def __init__(self, merges):
        self.bpe = load("bpe.BPE")(merges)

    def encode(self, text):
        return self.bpe.encode(text)

    def decode(self, ids):
        return self.bpe.decode(ids)


def _tokenizer_cases(g):
    train = course_text("train")  # the first case is drawn from the variant's seed
    start = int(torch.randint(0, len(train) - 4000, (1,), generator=g))
    merges = train_bpe(train[start : start + 3000], 330)
    held = train[start + 3000 : start + 4000]
    cases = [
        Case(
            "74 merges from 3000 characters of the course text, 1000 characters after them",
            merges,
            [held],
            [Tokenizer(merges).encode(held)],
        )
    ]
    for i, (text, vocab_size) in enumerate([(_TEXTS[0], 268), (_TEXTS[2], 300)]):
        merges = train_bpe(text, vocab_size)
        others = (
            ["the cat ate the mat", "the rat\n\n  sat", "thethe cat-cat"]
            if i == 0
            else ["x = [1, 2]  # café\n", "cafés return xx", "naïve ü → ∑ 🙂"]
        )
        texts = [text] + others
        cases.append(
            Case(
                f"{len(merges)} merges, {len(texts)} texts",
                merges,
                texts,
                [Tokenizer(merges).encode(t) for t in texts],
            )
        )
    return cases


register(
    "check_a3_tokenizer",
    Reference(
        seed=32,
        cases=_tokenizer_cases,
        solution=Tokenizer,
        mistakes=[
            _variant(Tokenizer, leftmost=True),
            _variant(Tokenizer, split=False),
            _variant(Tokenizer, per_token_decode=True),
            _variant(Tokenizer, one_round=True),
        ],
        shortcuts=[_LibraryTokenizer],
    ),
)


# ======================================================================================
# Part 2: the model
# ======================================================================================
class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, causal=True, scaled=True, head_split="columns"):
        super().__init__()
        self.n_head, self.causal, self.scaled, self.head_split = n_head, causal, scaled, head_split
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.out = nn.Linear(n_embd, n_embd)

    def heads(self, x):
        B, T, C = x.shape
        if self.head_split == "columns":
            return x.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, h, T, d)
        return x.view(B, T, C // self.n_head, self.n_head).permute(0, 3, 1, 2)

    def attend(self, q, k, v):
        """q (B, h, Tq, d), k and v (B, h, Tk, d), the queries the last Tq of the Tk positions."""
        scores = q @ k.transpose(-2, -1)
        if self.scaled:
            scores = scores / math.sqrt(q.shape[-1])
        Tq, Tk = scores.shape[-2:]
        if self.causal:
            scores = scores.masked_fill(torch.ones(Tq, Tk, dtype=torch.bool).triu(Tk - Tq + 1), float("-inf"))
        y = scores.softmax(-1) @ v  # (B, h, Tq, d)
        B, h, _, d = y.shape
        if self.head_split == "columns":
            y = y.transpose(1, 2).reshape(B, Tq, h * d)
        else:
            y = y.permute(0, 2, 3, 1).reshape(B, Tq, h * d)
        return self.out(y)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return self.attend(self.heads(q), self.heads(k), self.heads(v))


class MLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.fc = nn.Linear(n_embd, 4 * n_embd)
        self.proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x)))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, post_ln=False, **attention):
        super().__init__()
        self.post_ln = post_ln
        self.ln1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, **attention)
        self.ln2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        if self.post_ln:
            x = self.ln1(x + self.attn(x))
            return self.ln2(x + self.mlp(x))
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """The reference GPT; the class attributes are the typical mistakes."""

    block_options: ClassVar[dict] = {}
    tied = True
    final_norm = True

    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd):
        super().__init__()
        self.block_size = block_size
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.blocks = nn.ModuleList(Block(n_embd, n_head, **self.block_options) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, vocab_size, bias=False)
        if self.tied:
            self.head.weight = self.wte.weight
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith(("out.weight", "proj.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, ids):
        T = ids.shape[1]
        if self.block_size < T:
            raise ValueError(f"ids has {T} tokens, more than block_size={self.block_size}")
        x = self.wte(ids) + self.wpe(torch.arange(T))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x) if self.final_norm else x)


def _gpt(**attrs):
    return type("GPTMistake", (GPT,), attrs)


class _SdpaAttention(CausalSelfAttention):
    def forward(self, x):
        q, k, v = (self.heads(t) for t in self.qkv(x).chunk(3, dim=-1))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        B, h, T, d = y.shape
        return self.out(y.transpose(1, 2).reshape(B, T, h * d))


class _SdpaBlock(Block):
    def __init__(self, n_embd, n_head):
        super().__init__(n_embd, n_head)
        self.attn = _SdpaAttention(n_embd, n_head)


class _SdpaGPT(GPT):
    """A shortcut: the attention by F.scaled_dot_product_attention (refused at the aten level,
    whichever route reaches it)."""

    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd):
        super().__init__(vocab_size, block_size, n_layer, n_head, n_embd)
        self.blocks = nn.ModuleList(_SdpaBlock(n_embd, n_head) for _ in range(n_layer))


class _MathSdpaGPT(_SdpaGPT):
    """A shortcut: the low-level aten operator of the math attention, called directly."""

    def forward(self, ids):
        T = ids.shape[1]
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        q = torch.randn(1, 1, T, 4)
        torch.ops.aten._scaled_dot_product_attention_math(q, q, q, mask)
        return super().forward(ids)


class _TorchMHAGPT(GPT):
    """A shortcut: torch.nn.MultiheadAttention built inside the model."""

    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd):
        super().__init__(vocab_size, block_size, n_layer, n_head, n_embd)
        self.mha = nn.MultiheadAttention(n_embd, n_head, batch_first=True)


class _SplitHeadsGPT(GPT):
    """A shortcut: course_lib.multihead's split_heads inside the forward."""

    def forward(self, ids):
        load("multihead.split_heads")(self.wte(ids), 1)
        return super().forward(ids)


def _strong(model, g, std=0.3):
    """Redraw the weights so that the attention matters (at std 0.02 it barely moves the
    logits, and a model without a mask or a scale gives nearly the same ones)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(
                torch.randn(p.shape, generator=g) * (std if p.dim() >= 2 else 0.1)
                + (1.0 if ("ln" in name or "norm" in name) and name.endswith("weight") else 0.0)
            )
    return model


def _config(vocab_size, block_size, n_layer, n_head, n_embd):
    return {
        "vocab_size": vocab_size,
        "block_size": block_size,
        "n_layer": n_layer,
        "n_head": n_head,
        "n_embd": n_embd,
    }


def _weights(config, g):
    return {k: v.detach().clone() for k, v in _strong(GPT(**config), g).state_dict().items()}


def _gpt_cases(g):
    cases = []
    for text, config, shape in [
        ("2 blocks, 2 heads, a batch of 3 sequences of 7", _config(13, 8, 2, 2, 16), (3, 7)),
        ("1 block, 4 heads of width 2, one sequence of the full context", _config(9, 6, 1, 4, 8), (1, 6)),
        ("3 blocks, 1 head, a batch of 2 of 1 token", _config(11, 5, 3, 1, 12), (2, 1)),
    ]:
        ids = torch.randint(0, config["vocab_size"], shape, generator=g)
        cases.append(Case(text, config, _weights(config, g), ids))
    return cases


register(
    "check_a3_gpt",
    Reference(
        seed=33,
        cases=_gpt_cases,
        solution=GPT,
        mistakes=[
            _gpt(block_options={"causal": False}),
            _gpt(block_options={"post_ln": True}),
            _gpt(block_options={"scaled": False}),
            _gpt(tied=False),
            _gpt(final_norm=False),
            _gpt(block_options={"head_split": "interleaved"}),
        ],
        shortcuts=[_SdpaGPT, _MathSdpaGPT, _TorchMHAGPT, _SplitHeadsGPT],
    ),
)
