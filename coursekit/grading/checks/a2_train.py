"""References of assignment 2, parts 5 to 7: the label-smoothed loss, the schedule, the training
step, greedy decoding and the goal (``course_lib/exercises/a2.py``; parts 1 to 3 in ``a2.py``,
part 4 in ``a2_model.py``).

Each part's reference is written from tensor operations, with keywords that turn on its typical
mistakes; the shortcuts are right answers through what the part puts off limits (each must be
refused): the course's own modules, a subclass of one, torch's Transformer modules, and the aten
operators beneath ``F.scaled_dot_product_attention`` and ``F.cross_entropy``.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_lib.exercises import a2

from ..references import Case, GoalReference, Reference, load, register
from .a2_model import _Model


# --------------------------------------------------------------------------------------
# Part 5: the loss, the schedule, the training step
# --------------------------------------------------------------------------------------
def smoothed_loss(logits, tgt_out, pad_id, eps, spread="others", mean_over="real"):
    V = logits.shape[-1]
    logp = logits.log_softmax(-1)  # (B, T, V)
    if spread == "all":  # F.cross_entropy's
        q = torch.full_like(logp, eps / V)
        q.scatter_add_(-1, tgt_out[..., None], torch.full_like(logp[..., :1], 1 - eps))
    else:
        q = torch.full_like(logp, eps / (V - 1 if spread == "with pad" else V - 2))
        if spread != "with pad":
            q[..., pad_id] = 0.0
        q.scatter_(-1, tgt_out[..., None], 1 - eps)
    per_token = -(q * logp).sum(-1)  # (B, T)
    real = tgt_out != pad_id
    if mean_over == "all":
        return per_token.mean()
    return per_token[real].sum() / real.sum()


def _loss_by_nll(logits, tgt_out, pad_id, eps):
    """Shortcut: the target's share through F.nll_loss."""
    V = logits.shape[-1]
    logp = logits.log_softmax(-1).flatten(0, 1)
    t = tgt_out.flatten()
    real = t != pad_id
    target_term = F.nll_loss(logp, t, ignore_index=pad_id, reduction="sum")
    others = -(logp.sum(-1) - logp[:, pad_id]) + logp.gather(1, t[:, None])[:, 0]
    return ((1 - eps) * target_term + eps / (V - 2) * others[real].sum()) / real.sum()


def _loss_by_cross_entropy(logits, tgt_out, pad_id, eps):
    """Shortcut: F.cross_entropy(label_smoothing=...) corrected to the statement's convention
    (through torch._C._nn, beneath the Python function)."""
    V = logits.shape[-1]
    logp = logits.log_softmax(-1)
    flat, t = logits.flatten(0, 1), tgt_out.flatten()
    smoothed = torch._C._nn.cross_entropy_loss(flat, t, None, 1, pad_id, eps * V / (V - 2))
    real = t != pad_id
    # cross_entropy spreads eps' / V on every token, the target and pad included: take them back
    correction = (
        eps / (V - 2) * (logp.flatten(0, 1)[:, pad_id] - logp.flatten(0, 1).gather(1, t[:, None])[:, 0])
    )
    return smoothed + correction[real].mean()


def _loss_cases(g):
    t1 = torch.tensor([[4, 5, 2, 0], [6, 2, 0, 0]])
    return [
        Case("eps 0: the ordinary cross-entropy", torch.randn(2, 4, 7, generator=g), t1, 0, 0.0),
        Case("eps 0.1, pad_id 0", torch.randn(2, 4, 7, generator=g), t1, 0, 0.1),
        Case(
            "eps 0.2, pad_id 3, V 11",
            torch.randn(3, 5, 11, generator=g),
            torch.tensor([[4, 5, 6, 2, 3], [7, 2, 3, 3, 3], [8, 9, 10, 4, 2]]),
            3,
            0.2,
        ),
    ]


register(
    "check_a2_smoothed_loss",
    Reference(
        seed=207,
        cases=_loss_cases,
        solution=smoothed_loss,
        mistakes=[
            lambda *a: smoothed_loss(*a, spread="all"),
            lambda *a: smoothed_loss(*a, mean_over="all"),
            lambda *a: smoothed_loss(*a, spread="with pad"),
        ],
        shortcuts=[_loss_by_nll, _loss_by_cross_entropy],
    ),
)


def lr_at(step, peak_lr, warmup, total_steps, count_from=1, fall="from peak"):
    s = step - (1 - count_from)
    if s <= warmup:
        return peak_lr * s / warmup
    if fall == "none":
        return peak_lr
    if fall == "from zero":
        return peak_lr * (total_steps - s) / total_steps
    return peak_lr * (total_steps - s) / (total_steps - warmup)


def _lr_by_scheduler(step, peak_lr, warmup, total_steps):
    """Shortcut: torch's LambdaLR over a dummy optimiser."""
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=peak_lr)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda i: min(i / warmup, (total_steps - i) / (total_steps - warmup))
    )
    for _ in range(step):
        sched.step()
    return opt.param_groups[0]["lr"]


def _random_schedule(g):
    warmup = int(torch.randint(2, 9, (1,), generator=g))
    total = warmup + int(torch.randint(5, 31, (1,), generator=g))
    peak = round(float(torch.rand(1, generator=g)) * 0.01 + 1e-4, 6)
    return Case(f"peak {peak:g}, warm-up {warmup} of {total} steps", peak, warmup, total)


register(
    "check_a2_lr_schedule",
    Reference(
        seed=208,
        cases=lambda g: [
            _random_schedule(g),
            Case("peak 0.5, warm-up 10 of 50 steps", 0.5, 10, 50),
            Case("peak 3e-3, warm-up 1 of 6 steps", 3e-3, 1, 6),
        ],
        hidden=lambda g: [_random_schedule(g), _random_schedule(g)],
        solution=lr_at,
        mistakes=[
            lambda *a: lr_at(*a, count_from=0),
            lambda *a: lr_at(*a, fall="from zero"),
            lambda *a: lr_at(*a, fall="none"),
        ],
        shortcuts=[_lr_by_scheduler],
    ),
)


def train_step(model, optimizer, src, tgt_out, step, hp, shift=True, zero=True, clip=True):
    for group in optimizer.param_groups:
        group["lr"] = lr_at(step, hp["peak_lr"], hp["warmup"], hp["total_steps"])
    bos = torch.full_like(tgt_out[:, :1], hp["bos_id"])
    tgt_in = torch.cat([bos, tgt_out[:, :-1]], dim=1) if shift else tgt_out
    model.train()
    loss = smoothed_loss(model(src, tgt_in), tgt_out, hp["pad_id"], hp["eps"])
    if zero:
        optimizer.zero_grad()
    loss.backward()
    if clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), hp["clip"])
    optimizer.step()
    return loss.item()


def _train_step_by_library(model, optimizer, src, tgt_out, step, hp):
    """Shortcut: the loss by F.cross_entropy (here without smoothing, eps = 0)."""
    for group in optimizer.param_groups:
        group["lr"] = lr_at(step, hp["peak_lr"], hp["warmup"], hp["total_steps"])
    tgt_in = torch.cat([torch.full_like(tgt_out[:, :1], hp["bos_id"]), tgt_out[:, :-1]], dim=1)
    logits = model(src, tgt_in)
    loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=hp["pad_id"])
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), hp["clip"])
    optimizer.step()
    return loss.item()


def _toy_state(toy_args, g, scale=1.0):
    return {
        k: torch.randn(v.shape, generator=g) * scale for k, v in a2.ToySeq2Seq(*toy_args).state_dict().items()
    }


def _train_step_cases(g):
    hp = dict(peak_lr=0.5, warmup=3, total_steps=10, bos_id=1, pad_id=0, eps=0.0, clip=0.5)
    toy = (9, 8, 6, 16, 0)
    return [
        Case(
            "steps 2 and 3 (warm-up), eps 0",
            toy,
            _toy_state(toy, g),
            torch.randint(4, 9, (4, 5), generator=g),
            torch.tensor([[4, 5, 6, 2], [7, 2, 0, 0], [5, 5, 2, 0], [6, 4, 7, 2]]),
            2,
            hp,
        ),
        Case(
            "steps 6 and 7 (falling), eps 0.1, clip 0.3",
            toy,
            _toy_state(toy, g),
            torch.randint(4, 9, (3, 6), generator=g),
            torch.tensor([[7, 6, 5, 4, 2], [4, 2, 0, 0, 0], [6, 6, 6, 2, 0]]),
            6,
            dict(hp, eps=0.1, clip=0.3),
        ),
    ]


register(
    "check_a2_train_step",
    Reference(
        seed=209,
        cases=_train_step_cases,
        solution=train_step,
        mistakes=[
            lambda *a: train_step(*a, shift=False),
            lambda *a: train_step(*a, zero=False),
            lambda *a: train_step(*a, clip=False),
        ],
        shortcuts=[_train_step_by_library],
    ),
)


# --------------------------------------------------------------------------------------
# Part 6: greedy decoding
# --------------------------------------------------------------------------------------
@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id, eos_id, keep_bos=False, fill=True, stop="all", prefix="whole"):
    memory = model.encode(src)
    ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long)
    finished = torch.zeros(src.shape[0], dtype=torch.bool)
    for _ in range(max_len):
        read = ys if prefix == "whole" else ys[:, -1:]
        token = model.decode(read, memory, src)[:, -1].argmax(-1)  # (B,)
        if fill:
            token = token.masked_fill(finished, eos_id)
        ys = torch.cat([ys, token[:, None]], dim=1)
        finished |= token == eos_id
        if finished.all() or (stop == "any" and finished.any()):
            break
    return ys if keep_bos else ys[:, 1:]


def _decode_by_library(model, src, max_len, bos_id, eos_id):
    """Shortcut: course_lib.decoding.greedy over a step function."""
    memory = model.encode(src)

    def step(y, prefix):
        prefix = torch.cat([prefix, y[:, None]], dim=1)
        return model.decode(prefix, memory, src)[:, -1], prefix

    y0 = torch.full((src.shape[0],), bos_id, dtype=torch.long)
    tokens, _ = load("decoding.greedy")(step, y0, src.new_zeros(src.shape[0], 0), max_len, eos_id)
    return tokens


def _decode_cases(g):
    cases = []
    for description, toy, B, S, max_len, _seed in [
        ("a batch of 4 whose rows end at different steps", (9, 7, 6, 16, 0), 4, 5, 8, 0),
        ("a batch of 3, some rows never end within max_len", (9, 7, 6, 16, 0), 3, 4, 6, 1),
        ("a batch of 5, max_len 10", (11, 8, 8, 16, 0), 5, 6, 10, 2),
    ]:
        state = _toy_state(toy, g, scale=1.5)
        state["out.bias"][2] += 1.0  # <eos> comes soon
        src = torch.randint(4, toy[0], (B, S), generator=g)
        src[-1, -2:] = 0  # a padded source
        cases.append(Case(description, toy, state, src, max_len, 1, 2))
    return cases


register(
    "check_a2_greedy_decode",
    Reference(
        seed=210,
        cases=_decode_cases,
        solution=greedy_decode,
        mistakes=[
            lambda *a: greedy_decode(*a, keep_bos=True),
            lambda *a: greedy_decode(*a, fill=False),
            lambda *a: greedy_decode(*a, stop="any"),
            lambda *a: greedy_decode(*a, prefix="last"),
        ],
        shortcuts=[_decode_by_library],
    ),
)


# --------------------------------------------------------------------------------------
# Part 7: the goal
# --------------------------------------------------------------------------------------
HP = dict(peak_lr=3e-3, warmup=60, total_steps=400, bos_id=a2.BOS_ID, pad_id=a2.PAD_ID, eps=0.1, clip=1.0)


def reference_model(seed=0):
    torch.manual_seed(seed)
    return _Model(
        len(a2.SRC_VOCAB),
        len(a2.TGT_VOCAB),
        d_model=64,
        num_heads=4,
        num_layers=2,
        d_ff=128,
        dropout=0.0,
        max_len=32,
        pad_id=a2.PAD_ID,
        tie=True,
    )


def trained_reference(seed=0, steps=400):
    model = reference_model(seed)
    a2.train(model, train_step, steps, dict(HP, total_steps=steps), seed=seed)
    return model.eval(), greedy_decode


register(
    "check_a2_exact_match",
    GoalReference(passing=trained_reference, missing=lambda: (reference_model().eval(), greedy_decode)),
)
