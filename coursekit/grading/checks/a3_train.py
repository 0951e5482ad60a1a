"""References of assignment 3, parts 3 and 4: the learning-rate schedule, the optimiser, one
training step, bits per character with a sliding window (the solutions, the typical mistakes,
the shortcuts that must be refused, the cases; parts 1 and 2 in ``a3.py``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from course_lib.exercises._data import build

from ..references import Case, Reference, load, register
from .a3 import _strong


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
