"""References of the checks of chapter 2, "LSTM and GRU"."""

from __future__ import annotations

import functools

import torch

from course_lib.exercises._data import build
from course_lib.exercises._variant import variant_params
from course_lib.exercises.lstm import _DRAWS, _LOGITS, _SHOWN

from ..references import AnswerReference, Case, Reference, lib, randn, register


def _params(g, input_size, H, gates=1, scale=0.5):
    """(W_ih, W_hh, b_ih, b_hh) of a layer with `gates` stacked gates."""
    return (
        randn(g, gates * H, input_size, scale=scale),
        randn(g, gates * H, H, scale=scale),
        randn(g, gates * H, scale=scale),
        randn(g, gates * H, scale=scale),
    )


# --------------------------------------------------------------------------------------
# the GRU cell
# --------------------------------------------------------------------------------------
def _gru(x, h, W_ih, W_hh, b_ih, b_hh, mistake=None):
    """torch's GRU step (gates r, z, n), with the typical mistakes as switches."""
    xr, xz, xn = (x @ W_ih.T + b_ih).chunk(3, -1)
    hr, hz, hn = (h @ W_hh.T + b_hh).chunk(3, -1)
    if mistake == "r z swapped":
        xr, xz, hr, hz = xz, xr, hz, hr
    r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
    if mistake == "reset before":
        n = torch.tanh(xn + (r * h) @ W_hh.chunk(3, 0)[2].T + b_hh.chunk(3, 0)[2])
    elif mistake == "no reset":
        n = torch.tanh(xn + hn)
    else:
        n = torch.tanh(xn + r * hn)
    if mistake == "z swapped":
        return z * n + (1 - z) * h
    return (1 - z) * n + z * h


def _torch_gru_cell(x, h, W_ih, W_hh, b_ih, b_hh):
    cell = torch.nn.GRUCell(W_ih.shape[1], W_hh.shape[1])
    cell.load_state_dict({"weight_ih": W_ih, "weight_hh": W_hh, "bias_ih": b_ih, "bias_hh": b_hh})
    with torch.no_grad():
        return cell(x, h)


def _cell_cases(g):
    cases = []
    for description, B, input_size, H in [
        ("B=2, 3 inputs, 4 units", 2, 3, 4),
        ("one example, 5 inputs, 2 units", 1, 5, 2),
        ("B=4, 2 inputs, 6 units", 4, 2, 6),
    ]:
        x, h = randn(g, B, input_size), randn(g, B, H, scale=0.7)
        cases.append(Case(description, x, h, *_params(g, input_size, H, gates=3)))
    return cases


register(
    "check_gru_cell",
    Reference(
        seed=20,
        cases=_cell_cases,
        solution=lambda x, h, W_ih, W_hh, b_ih, b_hh: lib("rnn.gru_step")(x @ W_ih.T + b_ih, h, W_hh, b_hh),
        written=_gru,
        mistakes=[
            lambda *a: _gru(*a, mistake="z swapped"),
            lambda *a: _gru(*a, mistake="reset before"),
            lambda *a: _gru(*a, mistake="no reset"),
            lambda *a: _gru(*a, mistake="r z swapped"),
        ],
        shortcuts=[
            lambda x, h, W_ih, W_hh, b_ih, b_hh: lib("rnn.gru_step")(x @ W_ih.T + b_ih, h, W_hh, b_hh),
            _torch_gru_cell,
        ],
    ),
)


# --------------------------------------------------------------------------------------
# the forget-gate bias
# --------------------------------------------------------------------------------------


def _set_rows(lstm, value, block=1, names=("bias_ih",), zero=("bias_hh",), first_only=False):
    """Set rows [block*H, (block+1)*H) of the biases named `names` to value, of `zero` to 0."""
    H = lstm.hidden_size
    with torch.no_grad():
        for name, p in lstm.named_parameters():
            if first_only and name not in ("bias_ih_l0", "bias_hh_l0"):
                continue
            if name.startswith(names):
                p[block * H : (block + 1) * H] = value
            elif name.startswith(zero):
                p[block * H : (block + 1) * H] = 0.0


register(
    "check_set_forget_bias",
    Reference(
        cases=lambda g: [
            Case("one layer, 4 units, value 1", build("rnn.LSTM", 3, 4), 1.0),
            Case(
                "two layers, bidirectional, 3 units, value 2.5",
                build("rnn.LSTM", 2, 3, num_layers=2, bidirectional=True),
                2.5,
            ),
            Case("one layer, 5 units, value -1", build("rnn.LSTM", 2, 5), -1.0),
        ],
        solution=lib("rnn.set_forget_bias"),
        written=_set_rows,
        mistakes=[
            lambda lstm, v: _set_rows(lstm, v, block=0),
            lambda lstm, v: _set_rows(lstm, v, names=("bias_ih", "bias_hh"), zero=()),
            lambda lstm, v: _set_rows(lstm, v, zero=()),
            lambda lstm, v: _set_rows(lstm, v, first_only=True),
        ],
        shortcuts=[lib("rnn.set_forget_bias")],
    ),
)


# --------------------------------------------------------------------------------------
# a bidirectional layer from two directions
# --------------------------------------------------------------------------------------
def _bidirectional(forward, backward, x):
    both = type(forward)(forward.input_size, forward.hidden_size, bidirectional=True)
    state = dict(forward.state_dict())
    state.update({f"{k}_reverse": v for k, v in backward.state_dict().items()})
    both.load_state_dict(state)
    return both(x)[0]


def _torch_bidirectional(forward, backward, x):
    kind = {"GRU": torch.nn.GRU, "RNN": torch.nn.RNN, "LSTM": torch.nn.LSTM}[type(forward).__name__]
    both = kind(forward.input_size, forward.hidden_size, batch_first=True, bidirectional=True)
    state = dict(forward.state_dict())
    state.update({f"{k}_reverse": v for k, v in backward.state_dict().items()})
    both.load_state_dict(state)
    return both(x)[0]


def _bidirectional_cases(g):
    cases = []
    for description, kind, B, T, input_size, H in [
        ("GRU, B=2, T=5", "GRU", 2, 5, 3, 4),
        ("RNN, B=1, T=7", "RNN", 1, 7, 2, 3),
        ("LSTM, B=3, T=4", "LSTM", 3, 4, 2, 2),
    ]:
        cases.append(
            Case(
                description,
                build(f"rnn.{kind}", input_size, H),
                build(f"rnn.{kind}", input_size, H),
                randn(g, B, T, input_size),
            )
        )
    return cases


register(
    "check_bidirectional",
    Reference(
        seed=21,
        cases=_bidirectional_cases,
        solution=_bidirectional,
        written=lambda f, b, x: torch.cat([f(x)[0], b(x.flip(1))[0].flip(1)], -1),
        mistakes=[
            lambda f, b, x: torch.cat([f(x)[0], b(x.flip(1))[0]], -1),
            lambda f, b, x: torch.cat([f(x)[0], b(x)[0]], -1),
            lambda f, b, x: torch.cat([b(x.flip(1))[0].flip(1), f(x)[0]], -1),
            lambda f, b, x: (torch.cat([f(x)[0], b(x.flip(1))[0].flip(1)], -1), None),
        ],
        shortcuts=[_bidirectional, _torch_bidirectional],
    ),
)


# --------------------------------------------------------------------------------------
# sampling with a temperature
# --------------------------------------------------------------------------------------


def _sample(logits, temperature, generator, scaling="divide"):
    """One draw per row; `scaling` "multiply" and "ignore" are typical mistakes."""
    scaled = {
        "divide": lambda: logits / temperature,
        "multiply": lambda: logits * temperature,
        "ignore": lambda: logits,
    }[scaling]()
    return torch.multinomial(torch.softmax(scaled, -1), 1, generator=generator).squeeze(-1)


register(
    "check_sample_next",
    Reference(
        cases=lambda g: [
            Case(
                f"temperature {t}; {_DRAWS} copies of the logits {_SHOWN}",
                _LOGITS,
                t,
                torch.Generator().manual_seed(i),
            )
            for i, t in enumerate((1.0, 0.5, 2.0, 0.0), 1)
        ],
        solution=lambda logits, t, generator: lib("decoding.sample_next", "rnn.sample_next")(
            logits, t, generator=generator
        ),
        written=lambda lg, t, g: lg.argmax(-1) if t == 0 else _sample(lg, t, g),
        mistakes=[
            lambda lg, t, g: _sample(lg, t, g, "multiply"),
            lambda lg, t, g: _sample(lg, t, g, "ignore"),
            lambda lg, t, g: torch.randint(0, lg.shape[-1], lg.shape[:1], generator=g),
            lambda lg, t, g: _sample(lg, t, g),
        ],
        shortcuts=[lambda logits, t, generator: lib("decoding.sample_next")(logits, t, generator=generator)],
        hidden=lambda g: [
            Case(
                f"temperature {t}; {_DRAWS} copies of the logits {_SHOWN}",
                _LOGITS,
                t,
                torch.Generator().manual_seed(i),
            )
            for i, t in enumerate((0.7, 1.5, 0.0), 11)
        ],
    ),
)


# --------------------------------------------------------------------------------------
# the coupled-gate LSTM (input gate = 1 - forget gate)
# --------------------------------------------------------------------------------------
def _coupled(x, h, c, W_ih, W_hh, b_ih, b_hh, mistake=None):
    """One step of the LSTM with coupled input and forget gates (CIFG; Greff et al. 2017):
    blocks f, g, o; c' = f * c + (1 - f) * g, h' = o * tanh(c'). Mistakes as switches."""
    f, g, o = (x @ W_ih.T + b_ih + h @ W_hh.T + b_hh).chunk(3, -1)
    if mistake == "blocks g f o":
        g, f = f, g
    f, g, o = torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
    if mistake == "coupled the wrong way":
        c = (1 - f) * c + f * g
    elif mistake == "no input gate":
        c = f * c + g
    else:
        c = f * c + (1 - f) * g
    return (o * c if mistake == "no tanh" else o * torch.tanh(c)), c


def _coupled_cases(g):
    cases = []
    for description, B, input_size, H in [
        ("B=2, 3 inputs, 4 units", 2, 3, 4),
        ("one example, 5 inputs, 2 units", 1, 5, 2),
        ("B=4, 2 inputs, 6 units", 4, 2, 6),
    ]:
        x, h, c = randn(g, B, input_size), randn(g, B, H, scale=0.7), randn(g, B, H, scale=1.5)
        cases.append(Case(description, x, h, c, *_params(g, input_size, H, gates=3)))
    return cases


register(
    "check_coupled_lstm_cell",
    Reference(
        seed=22,
        cases=_coupled_cases,
        solution=_coupled,
        mistakes=[
            lambda *a: _coupled(*a, mistake="coupled the wrong way"),
            lambda *a: _coupled(*a, mistake="no input gate"),
            lambda *a: _coupled(*a, mistake="no tanh"),
            lambda *a: _coupled(*a, mistake="blocks g f o"),
        ],
        shortcuts=[],
    ),
)


# --------------------------------------------------------------------------------------
# the forget bias at which the gradient reaches 50 steps back
# --------------------------------------------------------------------------------------
_BIASES = [0.25 * k for k in range(17)]  # 0, 0.25, ..., 4


@functools.lru_cache(maxsize=256)
def _reach_curves_at_start(bias, steps):
    """gradient_reach's curves of a fresh LSTM reading `steps` steps, all the way back (k = steps)."""
    measured = lib("widgets.gradient_reach")("lstm", forget_bias=bias, steps=steps)
    return {curve: measured[curve][steps].item() for curve in ("reach", "forget_product")}


def _reach_at_start(bias, curve, steps):
    return _reach_curves_at_start(bias, steps)[curve]


def smallest_reaching_bias(curve="reach", last_below=False, params=None):
    """The smallest forget bias of 0, 0.25, ..., 4 at which widgets.gradient_reach(..., steps)'s
    `curve` ("reach", or "forget_product": the additive path alone) exceeds `threshold` at
    k = steps, where (steps, threshold) = variant_params("ex-reach-bias") (50 and 1e-2 on the
    book's page) unless `params` gives them. last_below=True returns the bias just before it
    (a typical off-by-one)."""
    steps, threshold = params or variant_params("ex-reach-bias")
    previous = None
    for bias in _BIASES:
        if _reach_at_start(bias, curve, steps) > threshold:
            return previous if last_below else bias
        previous = bias
    return float("inf")


register(
    "check_reach_bias",
    AnswerReference(
        value=smallest_reaching_bias,
        mistakes=[
            lambda: smallest_reaching_bias("forget_product"),
            lambda: smallest_reaching_bias(last_below=True),
        ],
    ),
)


# --------------------------------------------------------------------------------------
# predict, then measure: how far a GRU's gradient reaches with a large update-gate bias
# --------------------------------------------------------------------------------------
