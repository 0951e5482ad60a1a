"""References of assignment 3, "A GPT end to end": the solutions from tensor operations, the
typical mistakes, the shortcuts that must be refused, and the cases."""

from __future__ import annotations

import math
from collections import Counter
from functools import cache
from itertools import pairwise
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from course_lib.exercises._data import build
from course_lib.exercises._variant import variant_seed
from course_lib.exercises.a3 import bpe_training_text, course_text, pieces

from ..references import Case, GoalReference, Reference, load, register


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


# ======================================================================================
# Part 3: the schedule, the optimiser, one step
# ======================================================================================
def lr_at(step, max_lr, warmup, total, min_lr, start=1, span="after", floor=True, hold=True):
    """The reference schedule; the keywords are the typical mistakes."""
    if step < warmup:
        return max_lr * (step + start) / warmup
    if step >= total and hold:
        return min_lr
    if span == "after":
        progress = (step - warmup) / (total - warmup)
    else:
        progress = step / total
    low = min_lr if floor else 0.0
    return low + 0.5 * (max_lr - low) * (1 + math.cos(math.pi * progress))


def _schedule_cases(g):
    warmup = int(torch.randint(3, 9, (1,), generator=g))
    return [
        Case("warmup 10, 100 steps, every step and 20 after", list(range(120)), 3e-3, 10, 100, 3e-4),
        Case(f"warmup {warmup}, 40 steps", list(range(50)), 1.0, warmup, 40, 0.1),
        Case("warmup 1, 25 steps, min_lr 0.001", [0, 1, 2, 12, 13, 24, 25, 30], 0.01, 1, 25, 0.001),
    ]


class _LambdaSchedule:
    """A shortcut: torch's LambdaLR computes the rate."""

    def __call__(self, step, max_lr, warmup, total, min_lr):
        p = torch.nn.Parameter(torch.zeros(1))
        opt = torch.optim.SGD([p], lr=max_lr)
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: lr_at(s, max_lr, warmup, total, min_lr) / max_lr
        )
        for _ in range(step):
            opt.step()
            sched.step()
        return opt.param_groups[0]["lr"]


register(
    "check_a3_lr_schedule",
    Reference(
        seed=34,
        cases=_schedule_cases,
        solution=lr_at,
        mistakes=[
            lambda *a: lr_at(*a, start=0),
            lambda *a: lr_at(*a, span="all"),
            lambda *a: lr_at(*a, floor=False),
            lambda *a: lr_at(*a, hold=False),
        ],
        shortcuts=[
            _LambdaSchedule(),
            lambda step, max_lr, warmup, total, min_lr: (
                max_lr * load("train.warmup_cosine")(step, total, warmup, min_lr / max_lr)
            ),
        ],
    ),
)


def make_optimizer(model, lr, weight_decay, rule="dim"):
    """The reference; rule is the typical mistake."""
    params = list(model.named_parameters())
    if rule == "dim":
        decayed = [p for _, p in params if p.dim() >= 2]
        plain = [p for _, p in params if p.dim() < 2]
    elif rule == "name":
        decayed = [p for n, p in params if n.endswith("weight")]
        plain = [p for n, p in params if not n.endswith("weight")]
    elif rule == "all":
        decayed, plain = [p for _, p in params], []
    else:
        decayed, plain = [], [p for _, p in params]
    groups = [{"params": decayed, "weight_decay": weight_decay}, {"params": plain, "weight_decay": 0.0}]
    return torch.optim.AdamW([grp for grp in groups if grp["params"]], lr=lr, betas=(0.9, 0.95))


def _optimizer_cases(g):
    return [
        Case(
            "a toy language model (embeddings, a linear layer, a LayerNorm, a tied head)",
            build("exercises.a3.ToyLM", 10, 6, 4),
            1e-3,
            0.1,
        ),
        Case("a wider toy language model", build("exercises.a3.ToyLM", 17, 8, 6), 3e-3, 0.05),
    ]


register(
    "check_a3_optimizer",
    Reference(
        seed=35,
        cases=_optimizer_cases,
        solution=make_optimizer,
        mistakes=[
            lambda m, lr, wd: make_optimizer(m, lr, wd, rule="all"),
            lambda m, lr, wd: make_optimizer(m, lr, wd, rule="name"),
            lambda m, lr, wd: make_optimizer(m, lr, wd, rule="none"),
        ],
    ),
)


def train_step(model, optimizer, x, y, max_norm, zero=True, clip="before", per_param=False, report="before"):
    """The reference step; the keywords are the typical mistakes."""
    logits = model(x)  # (B, T, V)
    loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
    if zero:
        optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    norm = torch.sqrt(sum((g * g).sum() for g in grads))
    if clip == "after":
        optimizer.step()
    if per_param:
        for g in grads:
            g.mul_(min(1.0, max_norm / (float(g.norm()) + 1e-6)))
    else:
        scale = min(1.0, max_norm / (float(norm) + 1e-6))
        for g in grads:
            g.mul_(scale)
    if clip == "before":
        optimizer.step()
    after = torch.sqrt(sum((g * g).sum() for g in grads))
    return loss.item(), float(norm if report == "before" else after)


def _train_step_cases(g):
    cases = []
    for text, (V, T, C), B, max_norm in [
        ("a batch of 4 of 6 tokens, clipped", (12, 6, 8), 4, 0.5),
        ("a batch of 2 of 3 tokens, clipped hard", (7, 4, 4), 2, 0.05),
        ("a batch of 3 of 5 tokens, a norm of 1", (9, 5, 6), 3, 1.0),
    ]:
        model = build("exercises.a3.ToyLM", V, T, C)
        _strong(model, g, std=1.0)
        x = torch.randint(0, V, (B, T), generator=g)
        y = torch.randint(0, V, (B, T), generator=g)
        stale = [torch.randn(p.shape, generator=g) for p in model.parameters()]
        cases.append(Case(text, model, x, y, max_norm, stale))
    return cases


def _clip_by_torch(model, optimizer, x, y, max_norm):
    loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
    optimizer.zero_grad()
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    return loss.item(), float(norm)


def _clip_by_foreach(model, optimizer, x, y, max_norm):
    loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
    optimizer.zero_grad()
    loss.backward()
    grads = [p.grad for p in model.parameters()]
    norm = torch.stack(torch._foreach_norm(grads)).norm()
    torch._foreach_mul_(grads, min(1.0, max_norm / (float(norm) + 1e-6)))
    optimizer.step()
    return loss.item(), float(norm)


register(
    "check_a3_train_step",
    Reference(
        seed=36,
        cases=_train_step_cases,
        solution=train_step,
        mistakes=[
            lambda *a: train_step(*a, zero=False),
            lambda *a: train_step(*a, clip="after"),
            lambda *a: train_step(*a, per_param=True),
            lambda *a: train_step(*a, report="after"),
        ],
        shortcuts=[_clip_by_torch, _clip_by_foreach],
    ),
)


# ======================================================================================
# Part 4: bits per character with a sliding window
# ======================================================================================
def bits_per_char(model, ids, n_chars, stride, per="char", base=2.0, overlap=True, rescore=False):
    """The reference; the keywords are the typical mistakes."""
    block = model.block_size
    if not overlap:
        stride = block
    total, scored, count = 0.0, 0, 0  # scored: targets ids[1..scored] done
    for start in range(0, len(ids) - 1, stride):
        x = ids[start : start + block]  # (T,)
        y = ids[start + 1 : start + block + 1]  # (T',)
        logits = model(x[None])[0, : len(y)]  # (T', V)
        losses = F.cross_entropy(logits, y, reduction="none")  # nats, (T',)
        first_new = 0 if rescore else max(0, scored - start)
        total += float(losses[first_new:].sum())
        count += len(y) - first_new
        scored = start + len(y)
        if scored >= len(ids) - 1:
            break
    return total / math.log(base) / (n_chars if per == "char" else count)


def _bpc_cases(g):
    cases = []
    for text, (V, block, C), N, n_chars, stride in [
        ("40 tokens, context 8, stride 3", (11, 8, 6), 40, 97, 3),
        ("23 tokens, context 6, stride 6 (no overlap)", (7, 6, 4), 23, 51, 6),
        ("30 tokens, context 10, stride 1", (13, 10, 8), 30, 66, 1),
        ("9 tokens, context 16 (one window)", (5, 16, 4), 9, 20, 4),
    ]:
        model = _strong(build("exercises.a3.ToyLM", V, block, C), g, std=1.0).eval()
        cases.append(Case(text, model, torch.randint(0, V, (N,), generator=g), n_chars, stride))
    return cases


register(
    "check_a3_bits_per_char",
    Reference(
        seed=37,
        cases=_bpc_cases,
        solution=bits_per_char,
        mistakes=[
            lambda *a: bits_per_char(*a, per="token"),
            lambda *a: bits_per_char(*a, base=math.e),
            lambda *a: bits_per_char(*a, overlap=False),
            lambda *a: bits_per_char(*a, rescore=True),
        ],
        shortcuts=[
            lambda m, ids, n, s: load("train.bits_per_char")(bits_per_char(m, ids, n, s, base=math.e)),
            lambda m, ids, n, s: load("exercises.a3.heldout_bits_per_char")((m, None), 0),
        ],
    ),
)


# ======================================================================================
# Part 5: generation with one key/value cache per block
# ======================================================================================
class CachedGPT(GPT):
    """The reference cached generation; the class attributes are the typical mistakes."""

    cached = True
    position = "absolute"
    keep_prompt = True
    grow = True

    def block_step(self, block, x, cache):
        """x (B, 1, C), cache None or (k, v) each (B, h, t, d) -> x (B, 1, C), the grown cache."""
        attn = block.attn
        q, k, v = (attn.heads(t) for t in attn.qkv(block.ln1(x)).chunk(3, dim=-1))
        if cache is not None and self.grow:
            k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
        x = x + attn.attend(q, k, v)
        return x + block.mlp(block.ln2(x)), (k, v)

    @torch.no_grad()
    def generate(self, prompt, num_tokens):
        P = prompt.shape[1]
        caches, ids = [None] * len(self.blocks), prompt
        for t in range(P + num_tokens - 1):
            if self.cached:
                pos = torch.tensor([t if self.position == "absolute" else 0])
                x = self.wte(ids[:, t : t + 1]) + self.wpe(pos)  # (B, 1, C)
                for i, block in enumerate(self.blocks):
                    x, caches[i] = self.block_step(block, x, caches[i])
                logits = self.head(self.ln_f(x))[:, -1]  # (B, V)
            else:
                logits = self(ids[:, : t + 1])[:, -1]
            if t >= P - 1:
                ids = torch.cat([ids, logits.argmax(-1, keepdim=True)], dim=1)
        return ids if self.keep_prompt else ids[:, P:]


def _cached(**attrs):
    return type("CachedGPTMistake", (CachedGPT,), attrs)


class _DecodingGPT(CachedGPT):
    """A shortcut: course_lib's greedy decoding loop."""

    def generate(self, prompt, num_tokens):
        def step(y, state):
            return self(state)[:, -1], state

        load("decoding.greedy")(step, prompt[:, -1], prompt, num_tokens)
        return super().generate(prompt, num_tokens)


class _SdpaCachedGPT(CachedGPT):
    """A shortcut: the cached attention by F.scaled_dot_product_attention."""

    def block_step(self, block, x, cache):
        attn = block.attn
        q, k, v = (attn.heads(t) for t in attn.qkv(block.ln1(x)).chunk(3, dim=-1))
        if cache is not None:
            k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
        y = F.scaled_dot_product_attention(q, k, v)
        B, h, _, d = y.shape
        x = x + attn.out(y.transpose(1, 2).reshape(B, 1, h * d))
        return x + block.mlp(block.ln2(x)), (k, v)


def _generate_cases(g):
    cases = []
    for text, config, B, P, n in [
        ("2 blocks, 2 heads, a batch of 3 prompts of 4, 6 new tokens", _config(11, 16, 2, 2, 16), 3, 4, 6),
        ("1 block, 1 head, a prompt of 1 token, 8 new tokens", _config(7, 12, 1, 1, 8), 1, 1, 8),
        ("2 blocks, up to the context's end", _config(11, 16, 2, 4, 16), 2, 9, 7),
    ]:
        state = _weights(config, g)
        prompt = torch.randint(0, config["vocab_size"], (B, P), generator=g)
        cases.append(Case(text, config, state, prompt, n))
    return cases


register(
    "check_a3_generate_cached",
    Reference(
        seed=38,
        cases=_generate_cases,
        solution=CachedGPT,
        mistakes=[
            _cached(cached=False),
            _cached(position="zero"),
            _cached(keep_prompt=False),
            _cached(grow=False),
        ],
        shortcuts=[_DecodingGPT, _SdpaCachedGPT],
    ),
)


# ======================================================================================
# Part 6: nucleus sampling
# ======================================================================================
def sample_top_p(
    logits, temperature, top_p, generator, keep="before", order="vocabulary", first="temperature"
):
    """The reference; the keywords are the typical mistakes."""
    if temperature == 0:
        return logits.argmax(-1)
    if first == "temperature":
        probs = torch.softmax(logits / temperature, -1)
    else:
        probs = torch.softmax(logits, -1)
    sorted_p, order_ids = probs.sort(-1, descending=True)  # (B, V)
    mass = sorted_p.cumsum(-1)
    keep_sorted = (mass - sorted_p < top_p) if keep == "before" else (mass <= top_p)
    if first != "temperature":
        sorted_p = torch.softmax(logits / temperature, -1).gather(-1, order_ids)
    kept_sorted = sorted_p * keep_sorted
    if order == "sorted":
        return torch.multinomial(kept_sorted, 1, generator=generator).squeeze(-1)
    kept = torch.zeros_like(probs).scatter(-1, order_ids, kept_sorted)
    return torch.multinomial(kept, 1, generator=generator).squeeze(-1)


def _no_zero_case(logits, temperature, top_p, generator):
    """A mistake: no special case for temperature 0 (the division gives inf and NaN)."""
    probs = torch.softmax(logits / temperature, -1)
    if torch.isnan(probs).any():
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    return sample_top_p(logits, temperature, top_p, generator)


def _sampling_cases(g):
    def logits(B, V, scale):
        return torch.randn(B, V, generator=g) * scale

    return [
        Case("64 rows of 10 ids, T=1, top_p=0.8", logits(64, 10, 2.0), 1.0, 0.8, 5),
        Case("64 rows of 12 ids, T=0.7, top_p=0.5", logits(64, 12, 1.5), 0.7, 0.5, 6),
        Case("64 rows of 8 ids, T=1.5, top_p=0.9", logits(64, 8, 3.0), 1.5, 0.9, 7),
        Case("4 rows of 6 ids, temperature 0", logits(4, 6, 1.0), 0, 0.9, 8),
    ]


register(
    "check_a3_sample_top_p",
    Reference(
        seed=39,
        cases=_sampling_cases,
        solution=sample_top_p,
        mistakes=[
            lambda *a: sample_top_p(*a, keep="within"),
            lambda *a: sample_top_p(*a, order="sorted"),
            lambda *a: sample_top_p(*a, first="filter"),
            _no_zero_case,
        ],
        shortcuts=[
            lambda lg, t, p, g: load("decoding.sample_next")(lg, t, top_p=p, generator=g),
            lambda lg, t, p, g: torch.multinomial(
                torch.softmax(load("decoding.top_p_filter")(lg / t, p), -1), 1, generator=g
            ).squeeze(-1),
        ],
    ),
)


# ======================================================================================
# The goal: a trained reference (model, tokenizer)
# ======================================================================================
VOCAB_SIZE, BLOCK_SIZE, N_LAYER, N_HEAD, N_EMBD = 512, 64, 2, 4, 64
STEPS, BATCH, MAX_LR, WARMUP, WEIGHT_DECAY, MAX_NORM = 800, 16, 4e-3, 80, 0.1, 1.0


def train_reference(seed: int | None = None, steps: int = STEPS, vocab_size: int = VOCAB_SIZE):
    """The notebook's pipeline with the references: tokenizer, encoding, training. Returns
    (model, tokenizer). (vocab_size=1024 is the written part's question, measured for the
    rubric's model answer.)"""
    seed = variant_seed() if seed is None else seed
    tokenizer = reference_tokenizer(seed, vocab_size)
    ids = torch.tensor(tokenizer.encode(course_text("train")))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = GPT(vocab_size, BLOCK_SIZE, N_LAYER, N_HEAD, N_EMBD)
    optimizer = make_optimizer(model, MAX_LR, WEIGHT_DECAY)
    g = torch.Generator().manual_seed(seed * 7919 + 1)
    offsets = torch.arange(BLOCK_SIZE + 1)
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, MAX_LR, WARMUP, steps, MAX_LR / 10)
        starts = torch.randint(0, len(ids) - BLOCK_SIZE - 1, (BATCH, 1), generator=g)
        windows = ids[starts + offsets]  # (B, T + 1)
        train_step(model, optimizer, windows[:, :-1], windows[:, 1:], MAX_NORM)
    return model.eval(), tokenizer


@cache
def reference_tokenizer(seed: int, vocab_size: int = VOCAB_SIZE) -> Tokenizer:
    """The notebook's tokenizer for the variant ``seed``: 512 tokens from 150,000 characters."""
    return Tokenizer(train_bpe(bpe_training_text(seed), vocab_size))


@cache
def _trained():
    return train_reference()


def _untrained():
    tokenizer = reference_tokenizer(variant_seed())
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        fresh = GPT(VOCAB_SIZE, BLOCK_SIZE, N_LAYER, N_HEAD, N_EMBD).eval()
    return fresh, tokenizer


register("check_a3_heldout_bpc", GoalReference(passing=_trained, missing=_untrained))
