"""References of the debugging exercises' checks, and the measurements that find each planted bug
(the instructor's answer to "what did you measure?")."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from course_lib.exercises import debugging as suspects
from course_lib.exercises._data import build

from ..references import Case, Reference, lib, load, randn, register


# --------------------------------------------------------------------------------------
# Part 1: the LSTM step
# --------------------------------------------------------------------------------------
def _lstm_step(x_proj, state, weight_hh, bias_hh, order="ifgo", write=True, squash=True, candidate="tanh"):
    """One LSTM step from tensor operations; the keywords are typical mistakes."""
    h, c = state
    blocks = dict(zip(order, (x_proj + F.linear(h, weight_hh, bias_hh)).chunk(4, dim=-1)))
    i, f, o = (torch.sigmoid(blocks[k]) for k in "ifo")
    g = torch.tanh(blocks["g"]) if candidate == "tanh" else torch.sigmoid(blocks["g"])
    c = f * c + (i * g if write else g)
    return o * (torch.tanh(c) if squash else c), c


def _forget_probe(H=3):
    """The first case, a probe of the forget gate: h = 0, c = 1, x_proj zero but the forget block
    (rows H..2H) at +3, no bias: a right step keeps sigmoid(3) = 0.953 of c (the candidate is
    tanh(0) = 0), so the check's message can say how much of c the learner's step keeps."""
    x_proj = torch.zeros(2, 4 * H)
    x_proj[:, H : 2 * H] = 3.0
    weight_hh = torch.linspace(-0.5, 0.5, 4 * H * H).reshape(4 * H, H)
    return Case(
        "a probe: h = 0, c = 1, x_proj zero but the forget block (rows H..2H) at +3, no bias",
        x_proj,
        (torch.zeros(2, H), torch.ones(2, H)),
        weight_hh,
        torch.zeros(4 * H),
    )


def _lstm_cases(g):
    cases = [_forget_probe()]
    for description, B, H in [("B=2, 3 units", 2, 3), ("one example, 5 units", 1, 5), ("B=4, 2 units", 4, 2)]:
        state = (randn(g, B, H, scale=0.7), randn(g, B, H, scale=1.5))
        cases.append(
            Case(
                description,
                randn(g, B, 4 * H),
                state,
                randn(g, 4 * H, H, scale=0.5),
                randn(g, 4 * H, scale=0.5),
            )
        )
    return cases


register(
    "check_lstm_step",
    Reference(
        seed=30,
        cases=_lstm_cases,
        solution=lib("rnn.lstm_step"),
        written=_lstm_step,
        mistakes=[
            lambda *a: _lstm_step(*a, write=False),
            lambda *a: _lstm_step(*a, squash=False),
            lambda *a: _lstm_step(*a, candidate="sigmoid"),
        ],
        shortcuts=[lib("rnn.lstm_step")],
    ),
)


def lstm_reach(step, forget_bias=3.0, steps=50, hidden=32, seed=0):
    """The measurement that finds part 1's bug: ||d(u . c_T)/d c_0|| of a fresh LSTM with its
    forget bias set (on torch's forget rows), stepped by `step`. A right step keeps about
    sigmoid(3) ** 50 = 0.09 of the gradient; the suspect keeps almost nothing."""
    g = torch.Generator().manual_seed(seed)
    cell = build("rnn.LSTMCell", hidden, hidden).double()
    load("rnn.set_forget_bias")(cell, forget_bias)
    x = torch.randn(steps, 8, hidden, generator=g, dtype=torch.float64)
    h = torch.zeros(8, hidden, dtype=torch.float64)
    c0 = torch.zeros(8, hidden, dtype=torch.float64, requires_grad=True)
    c = c0
    for t in range(steps):
        h, c = step(F.linear(x[t], cell.weight_ih, cell.bias_ih), (h, c), cell.weight_hh, cell.bias_hh)
    u = torch.randn(hidden, generator=g, dtype=torch.float64)
    (grad,) = torch.autograd.grad((c @ u).sum(), c0)
    return float(grad.norm(dim=-1).mean())


# --------------------------------------------------------------------------------------
# Part 2: the source mask
# --------------------------------------------------------------------------------------
def _source_mask(lengths, S, allowed=True, dims=2, shift=0):
    """The mask of right-padded sources; the keywords are typical mistakes (shift=-1: both of
    the suspect's readings corrected at once, so the last real position is dropped)."""
    real = torch.arange(S)[None, :] < lengths[:, None] + shift
    real = real if allowed else ~real
    return real if dims == 2 else real[:, None, None, :]


register(
    "check_source_mask",
    Reference(
        seed=31,
        cases=lambda g: [
            Case("lengths 5 and 3, S = 5", torch.tensor([5, 3]), 5),
            Case("three sources, S longer than all of them", torch.tensor([1, 4, 2]), 6),
            Case("no padding at all", torch.tensor([3, 3]), 3),
        ],
        hidden=lambda g: [Case("random lengths, S = 8", torch.randint(1, 9, (5,), generator=g), 8)],
        solution=lambda lengths, S: lib("attention.padding_mask")(lengths, S)[:, 0, 0, :],
        written=_source_mask,
        mistakes=[
            lambda lengths, S: _source_mask(lengths, S, allowed=False),
            lambda lengths, S: _source_mask(lengths, S, shift=-1),
            lambda lengths, S: _source_mask(lengths, S, dims=4),
        ],
        shortcuts=[lambda lengths, S: lib("attention.padding_mask")(lengths, S)[:, 0, 0, :]],
    ),
)


def padding_sensitivity(mask_fn, seed=0):
    """The measurement that finds part 2's bug: how much one source's attention output changes
    when its batch is padded 3 positions longer (Luong dot attention over random encoder states,
    the pads random too). A right mask gives 0: padding must not change a real output."""
    g = torch.Generator().manual_seed(seed)
    lengths, S, H = torch.tensor([4, 6, 3]), 6, 8
    enc = torch.randn(3, S + 3, H, generator=g)
    query = torch.randn(3, H, generator=g)

    def attend(S_):
        scores = (enc[:, :S_] @ query[:, :, None])[..., 0]  # (B, S_)
        weights = torch.softmax(scores.masked_fill(~mask_fn(lengths, S_), float("-inf")), -1)
        return (weights[:, :, None] * enc[:, :S_]).sum(1)  # (B, H)

    return float((attend(S) - attend(S + 3)).abs().max())


# --------------------------------------------------------------------------------------
# Part 3: the causal mask
# --------------------------------------------------------------------------------------
def future_leak(mask_fn, T=8, seed=0):
    """The measurement that finds part 3's bug: the largest change of position t's output when
    only the token at t + 1 changes (one masked attention layer over random inputs). With a
    causal mask it is 0: position t may not read the future."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1, T, 16, generator=g)
    W = torch.randn(3, 16, 16, generator=g) / 4

    def out(x):
        q, k, v = (x @ w for w in W)
        scores = (q @ k.transpose(-2, -1) / 4).masked_fill(~mask_fn(T), float("-inf"))
        return torch.softmax(scores, -1) @ v

    changed = x.clone()
    changed[:, 1:] += torch.randn(1, T - 1, 16, generator=g)  # every token but the first
    diffs = [
        (out(x)[0, t] - out(torch.cat([x[:, : t + 1], changed[:, t + 1 :]], 1))[0, t]).abs().max()
        for t in range(T - 1)
    ]
    return float(max(diffs))


# --------------------------------------------------------------------------------------
# Part 4: the decoder layer
# --------------------------------------------------------------------------------------
def input_reach(layer_fn, seed=0):
    """The measurement that finds part 4's bug: the norm of d(sum of the layer's output)/d x, the
    gradient that reaches the decoder's input through one post-LN decoder layer, relative to
    the gradient that reaches the encoder's memory. A layer with all three residuals passes
    much of it straight to x; without the cross-attention's residual only the queries carry x."""
    torch.manual_seed(seed)
    layer = build("transformer.DecoderLayer", 16, 2, 32, dropout=0.0).eval()
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 5, 16, generator=g, requires_grad=True)
    memory = torch.randn(2, 7, 16, generator=g, requires_grad=True)
    u = torch.randn(16, generator=g)
    (layer_fn(layer, x, memory) @ u).sum().backward()
    return float(x.grad.norm() / memory.grad.norm())


SUSPECTS = {
    "lstm_step": (suspects.suspect_lstm_step, lib("rnn.lstm_step"), lstm_reach),
    "source_mask": (suspects.suspect_source_mask, _source_mask, padding_sensitivity),
    "causal_mask": (
        suspects.suspect_causal_mask,
        lambda T: torch.ones(T, T, dtype=torch.bool).tril(),
        future_leak,
    ),
    "decoder_layer": (suspects.suspect_decoder_layer, lambda layer, x, m: layer(x, m), input_reach),
}
