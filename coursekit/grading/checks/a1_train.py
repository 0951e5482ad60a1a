"""References of assignment 1, parts 5 to 9: the masked loss and accuracies, the training loop with
a schedule and clipping of one's own, beam search with length normalisation, and the goal
measured from a trained model (parts 1 to 4 in ``a1.py``).
"""

from __future__ import annotations

import math
from functools import cache

import torch
import torch.nn as nn

from course_lib.exercises import a1
from course_lib.exercises._data import build
from course_lib.exercises.seq2seq import _TableStep

from ..references import Case, GoalReference, Reference, load, register
from .a1 import PAD, Seq2Seq, V, make_batch


# --------------------------------------------------------------------------------------
# Part 5: the masked loss and accuracies
# --------------------------------------------------------------------------------------
def sequence_loss(logits, tgt_out, pad_id, mistake=None):
    """-> (mean cross-entropy over the real targets, token accuracy over them, the share of
    sequences whose every real target is the argmax)."""
    real = tgt_out != pad_id  # (B, T)
    if mistake == "unstable":
        logp = torch.log(torch.exp(logits) / torch.exp(logits).sum(-1, keepdim=True))
    else:
        logp = logits - logits.logsumexp(-1, keepdim=True)  # (B, T, V)
    nll = -logp.gather(-1, tgt_out[..., None]).squeeze(-1)  # (B, T)
    if mistake == "all_positions":
        loss = nll.mean()
    elif mistake == "per_sequence":
        loss = ((nll * real).sum(1) / real.sum(1)).mean()
    else:
        loss = (nll * real).sum() / real.sum()
    right = logits.argmax(-1) == tgt_out  # (B, T)
    token_acc = right.float().mean() if mistake == "token_all" else (right & real).sum() / real.sum()
    whole = right.all(1) if mistake == "sequence_pads" else (right | ~real).all(1)
    return loss, token_acc, whole.float().mean()


def _loss_cases(g):
    def targets(lengths, T):
        t = torch.randint(3, V, (len(lengths), T), generator=g)
        for i, n in enumerate(lengths):
            t[i, n:] = PAD
        return t

    def nudged(logits, tgt, share):
        """Make the argmax right at a share of the positions (so that accuracies are not 0)."""
        right = torch.rand(tgt.shape, generator=g) < share
        boost = torch.zeros_like(logits).scatter(-1, tgt[..., None], 4.0) * right[..., None]
        return logits + boost

    t1 = targets([4, 2, 3, 1], 4)
    t2 = targets([3, 3, 1], 3)
    t3 = targets([2, 4], 4)
    l1 = nudged(torch.randn(4, 4, V, generator=g), t1, 0.85)
    l1[1, 2:] = torch.randn(2, V, generator=g)  # padding positions: anything
    return [
        Case("4 targets of lengths 4, 2, 3 and 1 (padded with 0)", l1, t1, PAD),
        Case(
            "large logits (a few hundred): exp overflows",
            nudged(torch.randn(3, 3, V, generator=g) * 300, t2, 0.7),
            t2,
            PAD,
        ),
        Case(
            "2 targets, every real token right",
            nudged(torch.randn(2, 4, V, generator=g), t3, 1.0) * 3,
            t3,
            PAD,
        ),
    ]


register(
    "check_a1_sequence_loss",
    Reference(
        seed=3605,
        cases=_loss_cases,
        solution=sequence_loss,
        mistakes=[
            lambda lg, t, p: sequence_loss(lg, t, p, "all_positions"),
            lambda lg, t, p: sequence_loss(lg, t, p, "per_sequence"),
            lambda lg, t, p: sequence_loss(lg, t, p, "unstable"),
            lambda lg, t, p: sequence_loss(lg, t, p, "token_all"),
            lambda lg, t, p: sequence_loss(lg, t, p, "sequence_pads"),
        ],
        shortcuts=[
            lambda lg, t, p: (
                nn.functional.cross_entropy(lg.flatten(0, 1), t.flatten(), ignore_index=p),
                *sequence_loss(lg, t, p)[1:],
            ),
            lambda lg, t, p: (
                nn.functional.nll_loss(torch.log_softmax(lg, -1).flatten(0, 1), t.flatten(), ignore_index=p),
                *sequence_loss(lg, t, p)[1:],
            ),
            lambda lg, t, p: (
                torch._C._nn.cross_entropy_loss(lg.flatten(0, 1), t.flatten(), None, 1, p, 0.0),
                *sequence_loss(lg, t, p)[1:],
            ),
        ],
    ),
)


# --------------------------------------------------------------------------------------
# Part 6: the training loop, with a schedule and gradient clipping of one's own
# --------------------------------------------------------------------------------------
def lr_at(step, steps, peak_lr, warmup, mistake=None):
    """Linear warm-up to peak_lr over the first `warmup` steps, then linear decay to 0."""
    if step < warmup:
        return peak_lr * (step if mistake == "warmup_from_zero" else step + 1) / warmup
    return peak_lr * (steps - step) / (steps - warmup)


def clip_gradients(parameters, max_norm, per_tensor=False):
    """Scale all gradients together by max_norm / (total norm + 1e-6) when that is below 1."""
    grads = [p.grad for p in parameters if p.grad is not None]
    if per_tensor:
        for grad in grads:
            grad.mul_(min(1.0, max_norm / (float(grad.norm()) + 1e-6)))
        return
    total = math.sqrt(sum(float((grad**2).sum()) for grad in grads))
    scale = max_norm / (total + 1e-6)
    if scale < 1:
        for grad in grads:
            grad.mul_(scale)


def train(model, batches, steps, peak_lr, warmup, max_norm, mistake=None):
    """-> the training loss of each step (before its update)."""
    params = list(model.parameters())
    optimizer = torch.optim.Adam(params, lr=peak_lr)
    losses = []
    model.train()
    for step in range(steps):
        if mistake != "lr_after_step":
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step, steps, peak_lr, warmup, mistake)
        batch = batches[step % len(batches)]
        logits, _ = model(batch["src"], batch["src_len"], batch["tgt_in"])
        loss = sequence_loss(logits, batch["tgt_out"], PAD)[0]
        if mistake != "no_zero_grad":
            optimizer.zero_grad()
        loss.backward()
        if mistake != "no_clip":
            clip_gradients(params, max_norm, per_tensor=mistake == "per_tensor")
        optimizer.step()
        if mistake == "lr_after_step":
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step, steps, peak_lr, warmup)
        losses.append(loss.item())
    return losses


def _train_cases(g):
    pairs = a1.make_pairs(48, seed=int(torch.randint(0, 10**6, (1,), generator=g)))
    batches = []
    for i in range(0, 48, 16):
        chunk = pairs[i : i + 16]
        src, src_len, _, tgt_in, tgt_out = make_batch([s for s, _ in chunk], [t for _, t in chunk])
        batches.append({"src": src, "src_len": src_len, "tgt_in": tgt_in, "tgt_out": tgt_out})
    model = build("exercises.a1.ToyModel", V, 8)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
    return [
        Case(
            "6 steps over 3 batches, warm-up 2, gradients clipped to norm 0.5",
            model,
            batches,
            6,
            0.05,
            2,
            0.5,
        ),
        Case(
            "5 steps, warm-up 3, a norm bound of 100 that never clips", model, batches[:2], 5, 0.02, 3, 100.0
        ),
    ]


def _train_by_library_clip(model, batches, steps, peak_lr, warmup, max_norm):
    optimizer = torch.optim.Adam(model.parameters(), lr=peak_lr)
    losses = []
    for step in range(steps):
        optimizer.param_groups[0]["lr"] = lr_at(step, steps, peak_lr, warmup)
        batch = batches[step % len(batches)]
        logits = model(batch["src"], batch["src_len"], batch["tgt_in"])[0]
        loss = sequence_loss(logits, batch["tgt_out"], PAD)[0]
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()
        losses.append(loss.item())
    return losses


def _train_by_scheduler(model, batches, steps, peak_lr, warmup, max_norm):
    optimizer = torch.optim.Adam(model.parameters(), lr=peak_lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_at(s, steps, 1.0, warmup))
    losses = []
    for step in range(steps):
        batch = batches[step % len(batches)]
        logits = model(batch["src"], batch["src_len"], batch["tgt_in"])[0]
        loss = sequence_loss(logits, batch["tgt_out"], PAD)[0]
        optimizer.zero_grad()
        loss.backward()
        clip_gradients(list(model.parameters()), max_norm)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    return losses


register(
    "check_a1_train",
    Reference(
        seed=3606,
        cases=_train_cases,
        solution=train,
        mistakes=[
            lambda *a: train(*a, mistake="warmup_from_zero"),
            lambda *a: train(*a, mistake="lr_after_step"),
            lambda *a: train(*a, mistake="per_tensor"),
            lambda *a: train(*a, mistake="no_zero_grad"),
            lambda *a: train(*a, mistake="no_clip"),
        ],
        shortcuts=[_train_by_library_clip, _train_by_scheduler],
    ),
)


# --------------------------------------------------------------------------------------
# Part 7: beam search with length normalisation, one source at a time
# --------------------------------------------------------------------------------------
def beam_search(step, state, bos_id, eos_id, beam_size, max_len, alpha, mistake=None):
    """-> the best hypothesis's tokens (without bos and eos), by log p / |y|^alpha with |y|
    counting eos. The live hypotheses are extended by every token; the beam_size best
    candidates by log p are kept; those ending in eos are finished and leave the beam."""
    live = [[]]  # the tokens of each live hypothesis
    scores = torch.zeros(1)  # (k,) their log-probabilities
    y = torch.tensor([bos_id])
    finished = []  # (normalised score, tokens)
    for _ in range(max_len):
        logits, state = step(y, state)  # (k, V)
        logp = torch.log_softmax(logits.double(), -1)
        if mistake == "own_best":
            best, token = logp.max(-1)
            total, flat = (scores + best).sort(descending=True)
            tokens = token.tolist()
            cand = [(s, b, tokens[b]) for s, b in zip(total[:beam_size].tolist(), flat[:beam_size].tolist())]
        else:
            total = (scores[:, None] + logp).flatten()  # (k * V,)
            top, flat = total.topk(min(beam_size, total.numel()))
            V_ = logp.shape[-1]
            cand = [(s, i // V_, i % V_) for s, i in zip(top.tolist(), flat.tolist())]
        keep = []
        for s, b, tok in cand:
            if tok == eos_id and mistake != "eos_ordinary":
                n = len(live[b]) + (0 if mistake == "length_without_eos" else 1)
                norm = 1.0 if mistake == "no_normalisation" else max(n, 1) ** alpha
                finished.append((s / norm, live[b]))
            else:
                keep.append((s, b, tok))
        if not keep:
            break
        rows = torch.tensor([b for _, b, _ in keep])
        live = [live[b] + [tok] for _, b, tok in keep]
        scores = torch.tensor([s for s, _, _ in keep], dtype=torch.double)
        state, y = state[rows], torch.tensor([tok for _, _, tok in keep])
    else:
        for s, tokens in zip(scores.tolist(), live):
            norm = 1.0 if mistake == "no_normalisation" else len(tokens) ** alpha
            finished.append((s / norm, tokens))
    best = max(finished, key=lambda f: f[0])[1]
    if mistake == "eos_ordinary" and eos_id in best:
        best = best[: best.index(eos_id)]
    return best


_BEAM_MISTAKES = ("no_normalisation", "own_best", "length_without_eos", "eos_ordinary")


def _beam_cases(g):
    def table(T, V_, eos_bias):
        t = torch.randn(T, V_, V_, generator=g) * 2
        t[:, :, 2] += eos_bias
        return t

    # Random cases, kept while some typical mistake has not shown yet, and only if each mistake
    # that shows first on them gives a result of its own (the check names the first mistake
    # whose result equals the learner's, so an earlier mistake must not give the same).
    cases, pending = [], set(range(len(_BEAM_MISTAKES)))
    for trial in range(3000):
        if not pending:
            break
        K, alpha = (2, 3, 4)[trial % 3], (0.6, 1.0, 2.0)[(trial // 3) % 3]
        step = _TableStep(table(8, 6, (-1.0, 0.0, 0.5, 1.0)[trial % 4]))
        args = (step, torch.zeros(1, 3), 1, 2, K, 8, alpha)
        right = beam_search(*args)
        results = [beam_search(*args, mistake=m) for m in _BEAM_MISTAKES]
        showing = {i for i in pending if results[i] != right}
        if showing and all(results[i] not in results[:i] for i in showing):
            cases.append(Case(f"beam {K} over 6 tokens, alpha {alpha}", *args))
            pending -= showing
    if pending:
        raise RuntimeError("no telling cases for check_a1_beam_search")
    return [
        *cases,
        Case(
            "beam 2, eos rare: stop at max_len 5",
            _TableStep(table(6, 6, -6.0)),
            torch.zeros(1, 2),
            1,
            2,
            2,
            5,
            1.0,
        ),
        Case(
            "beam 5 over 8 tokens, alpha 0.8",
            _TableStep(table(9, 8, 0.0)),
            torch.zeros(1, 4),
            1,
            2,
            5,
            9,
            0.8,
        ),
    ]


def _beam_by_library(step, state, bos_id, eos_id, beam_size, max_len, alpha):
    tokens, _ = load("decoding.beam_search")(
        step, torch.tensor([bos_id]), state, max_len, beam_size, eos_id, alpha
    )
    best = tokens[0, 0].tolist()
    return best[: best.index(eos_id)] if eos_id in best else best


register(
    "check_a1_beam_search",
    Reference(
        seed=3607,
        cases=_beam_cases,
        solution=beam_search,
        mistakes=[
            *(lambda *a, m=m: beam_search(*a, mistake=m) for m in _BEAM_MISTAKES),
        ],
        shortcuts=[_beam_by_library],
    ),
)


# --------------------------------------------------------------------------------------
# Part 9: the goal, measured from a trained model
# --------------------------------------------------------------------------------------
def batches_of(pairs, batch_size):
    out = []
    for i in range(0, len(pairs), batch_size):
        chunk = pairs[i : i + batch_size]
        src, src_len, _, tgt_in, tgt_out = make_batch([s for s, _ in chunk], [t for _, t in chunk])
        out.append({"src": src, "src_len": src_len, "tgt_in": tgt_in, "tgt_out": tgt_out})
    return out


def train_reference(seed=0, steps=a1.TRAIN_STEPS):
    """The notebook's recipe with the reference parts (what a correct build hands in)."""
    torch.manual_seed(seed)
    pairs = a1.make_pairs(steps * a1.BATCH_SIZE, seed=seed * 7919 + 1)
    model = Seq2Seq(V, *a1.MODEL_SIZES)
    train(model, batches_of(pairs, a1.BATCH_SIZE), steps, a1.PEAK_LR, a1.WARMUP, a1.MAX_NORM)
    return model.eval()


@cache
def _trained():
    with torch.random.fork_rng(devices=[]):
        return train_reference(0)


def _untrained():
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return Seq2Seq(V, *a1.MODEL_SIZES).eval()


register("check_a1_exact_match", GoalReference(passing=_trained, missing=_untrained))
