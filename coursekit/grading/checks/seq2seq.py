"""References of the checks of chapter 3, "Sequence to sequence"."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from course_lib.exercises.seq2seq import _TableStep

from ..references import Case, Reference, lib, randn, register


# --------------------------------------------------------------------------------------
# The teacher-forced loss, padding ignored
# --------------------------------------------------------------------------------------
def _per_token(logits, tgt_out):
    return F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), reduction="none")


def _loss_cases(g):
    padded = torch.randint(1, 7, (3, 5), generator=g)
    padded[0, 3:] = 0
    padded[2, 1:] = 0
    other_pad = torch.randint(0, 6, (2, 6), generator=g)
    other_pad[1, 2:] = 6
    other_pad[0, 1] = 0  # a real token 0: a pad id hard-coded as 0 would drop it
    return [
        Case(
            "three targets of different lengths, right-padded with 0", randn(g, 3, 5, 7, scale=2.0), padded, 0
        ),
        Case("no padding at all", randn(g, 2, 4, 7), torch.randint(1, 7, (2, 4), generator=g), 0),
        Case("the pad id is 6, and 0 is a real token", randn(g, 2, 6, 7), other_pad, 6),
    ]


register(
    "check_sequence_loss",
    Reference(
        seed=10,
        cases=_loss_cases,
        solution=lambda logits, tgt, pad: F.cross_entropy(
            logits.flatten(0, 1), tgt.flatten(), ignore_index=pad
        ),
        written=lambda lg, t, pad: (_per_token(lg, t) * (t != pad).flatten()).sum() / (t != pad).sum(),
        mistakes=[
            lambda lg, t, pad: _per_token(lg, t).mean(),
            lambda lg, t, pad: _per_token(lg, t).sum() / (t != pad).sum(),
            lambda lg, t, pad: (_per_token(lg, t) * (t != pad).flatten()).sum(),
            lambda lg, t, pad: (_per_token(lg, t) * (t != pad).flatten()).sum() / t.numel(),
            lambda lg, t, pad: (
                (_per_token(lg, t).view(t.shape) * (t != pad)).sum(1) / (t != pad).sum(1)
            ).mean(),
            lambda lg, t, pad: (_per_token(lg, t) * (t != 0).flatten()).sum() / (t != 0).sum(),
        ],
        shortcuts=[
            lambda logits, tgt, pad: F.cross_entropy(logits.flatten(0, 1), tgt.flatten(), ignore_index=pad),
            lambda logits, tgt, pad: torch.nn.CrossEntropyLoss(ignore_index=pad)(
                logits.flatten(0, 1), tgt.flatten()
            ),
        ],
    ),
)


# --------------------------------------------------------------------------------------
# Greedy decoding
# --------------------------------------------------------------------------------------


def _greedy(step, state, bos_id, eos_id, max_len, keep_bos=False, stop=True, sticky=True, feed_back=True):
    """Greedy decoding; the keyword switches are the typical mistakes."""
    y = torch.full((len(state),), bos_id, dtype=torch.long)
    done = torch.zeros_like(y, dtype=torch.bool)
    out = [y] if keep_bos else []
    for _ in range(max_len):
        logits, state = step(y if feed_back else torch.full_like(y, bos_id), state)
        y = logits.argmax(-1)
        if sticky:
            y = torch.where(done, torch.full_like(y, eos_id), y)
        done |= y == eos_id
        out.append(y)
        if stop and bool(done.all()):
            break
    return torch.stack(out, 1)


def _greedy_cases(g):
    V = 6
    table = torch.randn(8, V, V, generator=g)
    table[:, :, 2] -= 1.0  # eos (id 2) is unlikely ...
    table[:, 3, 2] += 8.0  # ... except right after token 3
    table[:, 2, :] = torch.tensor([0.0, 0.0, -9.0, 5.0, 0.0, 0.0])  # after eos the model says 3
    ends_early = torch.randn(8, V, V, generator=g)
    ends_early[2, :, 2] += 10.0  # everyone ends at step 2
    never = torch.randn(8, V, V, generator=g)
    never[:, :, 2] = -10.0  # eos never wins: stop at max_len
    return [
        Case("a batch of 4 rows that end at different steps", _TableStep(table), torch.arange(4), 1, 2, 8),
        Case(
            "every row writes eos at step 2 (stop early)",
            _TableStep(ends_early),
            torch.zeros(3, dtype=torch.long),
            1,
            2,
            8,
        ),
        Case(
            "eos never comes: stop after max_len = 5 tokens",
            _TableStep(never),
            torch.zeros(2, dtype=torch.long),
            1,
            2,
            5,
        ),
        Case(
            "the state is a (B, H) float tensor, like a GRU's hidden state",
            _TableStep(table),
            torch.zeros(3, 4),
            1,
            2,
            8,
        ),
    ]


register(
    "check_greedy_search",
    Reference(
        seed=11,
        cases=_greedy_cases,
        solution=_greedy,
        mistakes=[
            lambda *a: _greedy(*a, keep_bos=True),
            lambda *a: _greedy(*a, stop=False),
            lambda *a: _greedy(*a, sticky=False),
            lambda *a: _greedy(*a, feed_back=False),
        ],
        shortcuts=[
            lambda step, state, bos, eos, n: lib("decoding.greedy")(
                step, torch.full_like(state, bos), state, n, eos
            )[0]
        ],
    ),
)


# --------------------------------------------------------------------------------------
# Picking the best finished beam with GNMT's length penalty
# --------------------------------------------------------------------------------------
def _gnmt(log_prob, lengths, alpha, form="gnmt", pick="max"):
    """Index (N,) of the best of K finished beams by log p / lp(|y|); `form` and `pick` are the
    typical mistakes."""
    n = lengths.to(log_prob.dtype)
    if form == "gnmt":
        penalty = ((5 + n) / 6) ** alpha
    elif form == "plain":
        penalty = n**alpha
    else:  # "none"
        penalty = torch.ones_like(n)
    ranked = log_prob * penalty if pick == "times" else log_prob / penalty
    return ranked.argmin(-1) if pick == "min" else ranked.argmax(-1)


def _gnmt_cases(g):
    short_vs_long = torch.tensor([[-4.0, -5.0, -9.0]]), torch.tensor([[3, 8, 20]])
    rand_lp = -torch.rand(4, 5, generator=g) * 12 - 0.5
    rand_len = torch.randint(1, 30, (4, 5), generator=g)
    return [
        Case("4 sources x 5 beams, alpha = 0.6", rand_lp, rand_len, 0.6),
        Case("a short, a medium and a long output, alpha = 1", *short_vs_long, 1.0),
        Case("alpha = 0: plain log-probability", rand_lp, rand_len, 0.0),
        Case(
            "a long output that the plain |y| form would favour, alpha = 1",
            torch.tensor([[-2.0, -3.5]]),
            torch.tensor([[2, 5]]),
            1.0,
        ),
    ]


register(
    "check_best_beam",
    Reference(
        seed=12,
        cases=_gnmt_cases,
        solution=_gnmt,
        mistakes=[
            lambda lp, n, a: _gnmt(lp, n, a, form="none"),
            lambda lp, n, a: _gnmt(lp, n, a, form="plain"),
            lambda lp, n, a: _gnmt(lp, n, a, pick="min"),
            lambda lp, n, a: _gnmt(lp, n, a, pick="times"),
        ],
        shortcuts=[],
    ),
)


# --------------------------------------------------------------------------------------
# Predict, then measure: how often greedy decoding misses the most likely output
# --------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------
# One step of beam search
# --------------------------------------------------------------------------------------
def _beam(scores, logp, K, divide_by=None, add_scores=True, per_beam=False):
    """One beam-search step; the keywords are the typical mistakes."""
    B, _, V = logp.shape
    if per_beam:  # each beam keeps only its own best token
        best, token = logp.max(-1)
        top, beam = (best + scores).sort(-1, descending=True)
        return top[:, :K], beam[:, :K], token.gather(1, beam[:, :K])
    total = (scores[..., None] if add_scores else 0) + logp  # (B, K_old, V)
    top, flat = total.reshape(B, -1).topk(K, -1)
    d = V if divide_by is None else divide_by
    return top, flat // d, flat % d


def _beam_cases(g):
    def logp(*shape):
        return torch.log_softmax(torch.randn(*shape, generator=g) * 2, -1)

    first = torch.tensor([[0.0, -math.inf, -math.inf]])  # one live beam at the start
    strong_weak = torch.log_softmax(torch.tensor([[[2.0, 1.5, -3.0], [4.0, -2.0, -2.0]]]), -1)
    return [
        Case("2 sources, 3 beams, 5 tokens", torch.randn(2, 3, generator=g) - 3, logp(2, 3, 5), 3),
        Case("the first step: only beam 0 is alive", first, logp(1, 3, 6), 3),
        Case(
            "a weak beam's best token loses to a strong beam's second best",
            torch.tensor([[-0.1, -5.0]]),
            strong_weak,
            2,
        ),
        Case("keep 4 of 2 beams x 7 tokens", torch.randn(3, 2, generator=g), logp(3, 2, 7), 4),
    ]


register(
    "check_beam_step",
    Reference(
        seed=12,
        cases=_beam_cases,
        solution=lib("decoding.beam_step", "seq2seq.beam_step"),
        written=_beam,
        mistakes=[
            lambda s, lp, K: _beam(s, lp, K, per_beam=True),
            lambda s, lp, K: tuple(_beam(s, lp, K)[i] for i in (0, 2, 1)),
            lambda s, lp, K: _beam(s, lp, K, divide_by=lp.shape[1]),
            lambda s, lp, K: _beam(s, lp, K, add_scores=False),
        ],
        shortcuts=[lib("decoding.beam_step")],
    ),
)
