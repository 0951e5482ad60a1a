"""Checks for chapter 2, "LSTM and GRU"."""

from __future__ import annotations

import functools

import torch

from ._compare import compare, within
from ._engine import Answer, Case, Check, Mistake, Prediction, WrongResult, lib, load, no_grad, randn


def _params(g, input_size, H, gates=1, scale=0.5):
    """(W_ih, W_hh, b_ih, b_hh) of a layer with `gates` stacked gates."""
    return (randn(g, gates * H, input_size, scale=scale), randn(g, gates * H, H, scale=scale),
            randn(g, gates * H, scale=scale), randn(g, gates * H, scale=scale))


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


def _cell_cases(g):
    cases = []
    for description, B, input_size, H in [("B=2, 3 inputs, 4 units", 2, 3, 4),
                                          ("one example, 5 inputs, 2 units", 1, 5, 2),
                                          ("B=4, 2 inputs, 6 units", 4, 2, 6)]:
        x, h = randn(g, B, input_size), randn(g, B, H, scale=0.7)
        cases.append(Case(description, x, h, *_params(g, input_size, H, gates=3)))
    return cases


check_gru_cell = Check(
    "check_gru_cell", "fn(x (B, I), h (B, H), W_ih (3H, I), W_hh (3H, H), b_ih, b_hh) -> h' (B, H), "
    "torch's GRU (gates r, z, n)",
    params=("x", "h", "W_ih", "W_hh", "b_ih", "b_hh"),
    reference=lambda x, h, W_ih, W_hh, b_ih, b_hh: lib("rnn.gru_step")(x @ W_ih.T + b_ih, h, W_hh, b_hh),
    cases=_cell_cases, seed=20,
    mistakes=[
        Mistake("z and 1 - z are swapped: in torch's convention z is the share of the OLD state "
                "kept, h' = (1 - z) * n + z * h.", lambda *a: _gru(*a, mistake="z swapped")),
        Mistake("the reset gate multiplies h before the matrix product (the paper's other "
                "variant); torch applies it after: n = tanh(x_n + r * (h @ W_hn.T + b_hn)).",
                lambda *a: _gru(*a, mistake="reset before")),
        Mistake("the reset gate is missing from the candidate: n = tanh(x_n + r * h_n).",
                lambda *a: _gru(*a, mistake="no reset")),
        Mistake("the r and z blocks are swapped: torch stacks the gates in the order r, z, n.",
                lambda *a: _gru(*a, mistake="r z swapped")),
    ],
    hints=["Project x and h once each (with their biases) and split both results into three "
           "blocks along the last dim, in torch's gate order.",
           "Two gates are sigmoids of the sum of their x and h blocks; the candidate is a tanh "
           "in which the reset gate scales the h block.",
           "The update gate z interpolates between the candidate and the old state; check which "
           "one z weights in torch's documentation of nn.GRU."],
)


# --------------------------------------------------------------------------------------
# the forget-gate bias
# --------------------------------------------------------------------------------------
def _parameters_after(fn, lstm, value):
    """Run fn(lstm, value) (it modifies lstm in place); observe every parameter."""
    fn(lstm, value)
    return {k: v.detach().clone() for k, v in lstm.named_parameters()}


def _set_rows(lstm, value, block=1, names=("bias_ih",), zero=("bias_hh",), first_only=False):
    """Set rows [block*H, (block+1)*H) of the biases named `names` to value, of `zero` to 0."""
    H = lstm.hidden_size
    with torch.no_grad():
        for name, p in lstm.named_parameters():
            if first_only and name not in ("bias_ih_l0", "bias_hh_l0"):
                continue
            if name.startswith(names):
                p[block * H:(block + 1) * H] = value
            elif name.startswith(zero):
                p[block * H:(block + 1) * H] = 0.0


def _changed_block(case, got, expected):
    """A gate other than f whose bias rows changed, whatever code changed them."""
    lstm = case.args[0]
    if not isinstance(got, dict):
        return None
    H = lstm.hidden_size
    for name, old in lstm.named_parameters():
        if name.startswith("bias") and name in got and got[name].shape == old.shape:
            for k, gate in enumerate("ifgo"):
                if gate != "f" and not torch.equal(got[name].chunk(4)[k], old.detach().chunk(4)[k]):
                    return (f"the {gate} block of {name} (rows {k * H}:{(k + 1) * H}) changed: the "
                            f"order is i, f, g, o, so the forget gate is rows {H}:{2 * H}.")
    return None


check_set_forget_bias = Check(
    "check_set_forget_bias", "fn(lstm, value) sets, in place, the forget gate's total bias "
    "(b_ih + b_hh) of every layer and direction of a course_lib LSTM to value",
    params=("lstm", "value"),
    reference=lib("rnn.set_forget_bias"), call=_parameters_after, diagnose=_changed_block,
    cases=lambda g: [
        Case("one layer, 4 units, value 1", load("rnn.LSTM")(3, 4), 1.0),
        Case("two layers, bidirectional, 3 units, value 2.5",
             load("rnn.LSTM")(2, 3, num_layers=2, bidirectional=True), 2.5),
        Case("one layer, 5 units, value -1", load("rnn.LSTM")(2, 5), -1.0),
    ],
    mistakes=[
        Mistake("the gates are stacked i, f, g, o: the forget gate is rows H:2H, not 0:H.",
                lambda lstm, v: _set_rows(lstm, v, block=0)),
        Mistake("the gate adds b_ih + b_hh, so setting both to value gives twice the value: set "
                "one to value and the other to 0.",
                lambda lstm, v: _set_rows(lstm, v, names=("bias_ih", "bias_hh"), zero=())),
        Mistake("the gate adds b_ih + b_hh: bias_hh's forget rows still hold their random values; "
                "set them to 0.", lambda lstm, v: _set_rows(lstm, v, zero=())),
        Mistake("every layer and direction has its own biases (bias_ih_l1, bias_ih_l0_reverse, "
                "...): set them all.", lambda lstm, v: _set_rows(lstm, v, first_only=True)),
    ],
    hints=["List the LSTM's parameters (lstm.named_parameters()): which ones are biases, and "
           "which rows of them belong to the forget gate?",
           "The four gates are stacked in torch's order i, f, g, o, H rows each; the gate sees "
           "the SUM of the two biases.",
           "Modify the parameters in place under torch.no_grad()."],
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


def _bidirectional_cases(g):
    cases = []
    for description, kind, B, T, input_size, H in [("GRU, B=2, T=5", "GRU", 2, 5, 3, 4),
                                                   ("RNN, B=1, T=7", "RNN", 1, 7, 2, 3),
                                                   ("LSTM, B=3, T=4", "LSTM", 3, 4, 2, 2)]:
        layer = load(f"rnn.{kind}")
        cases.append(Case(description, layer(input_size, H), layer(input_size, H),
                          randn(g, B, T, input_size)))
    return cases


check_bidirectional = Check(
    "check_bidirectional", "fn(forward, backward, x (B, T, I)) -> (B, T, 2H): the output of a "
    "bidirectional layer made of two one-directional layers",
    params=("forward", "backward", "x"),
    reference=_bidirectional, call=no_grad, cases=_bidirectional_cases, seed=21,
    mistakes=[
        Mistake("the backward outputs are in reversed time order: flip them back with .flip(1) "
                "before concatenating, so position t lines up with x[:, t].",
                lambda f, b, x: torch.cat([f(x)[0], b(x.flip(1))[0]], -1)),
        Mistake("the backward layer read x in the forward order: give it x.flip(1).",
                lambda f, b, x: torch.cat([f(x)[0], b(x)[0]], -1)),
        Mistake("the two halves are swapped: forward direction first, then backward.",
                lambda f, b, x: torch.cat([b(x.flip(1))[0].flip(1), f(x)[0]], -1)),
        Mistake("return only the output tensor (B, T, 2H), not the (output, state) pair.",
                lambda f, b, x: (torch.cat([f(x)[0], b(x.flip(1))[0].flip(1)], -1), None)),
    ],
    hints=["The backward direction is an ordinary layer that reads the sequence from its end.",
           "Reverse the time dim of x for it (.flip(1)), and reverse its outputs back, so that "
           "position t of both halves describes x[:, t].",
           "Concatenate the two outputs along the feature dim."],
)


# --------------------------------------------------------------------------------------
# sampling with a temperature
# --------------------------------------------------------------------------------------
_SHOWN = "[[2, 1, 0, -1], [0.5, 3, 0.2, 0.1]]"
_LOGITS = torch.tensor([[2.0, 1.0, 0.0, -1.0], [0.5, 3.0, 0.2, 0.1]])
_DRAWS = 4000


def _frequencies(fn, logits, temperature, generator):
    """Run fn on `_DRAWS` copies of the rows of `_LOGITS`; the frequency of each id per row."""
    ids = fn(logits, temperature, generator)
    rows, V = _LOGITS.shape
    if not isinstance(ids, torch.Tensor):
        raise WrongResult(f"expected a tensor of ids, got {type(ids).__name__}.")
    if ids.shape != (logits.shape[0],):
        raise WrongResult(f"expected shape {(logits.shape[0],)} (one id per row of logits), got "
                          f"{tuple(ids.shape)}" + (": add .squeeze(-1) after torch.multinomial("
                                                   "probs, 1)." if ids.dim() == 2 else "."))
    if ids.is_floating_point() or ids.dtype == torch.bool:
        raise WrongResult(f"expected integer ids (torch.long), got dtype {ids.dtype}.")
    if int(ids.min()) < 0 or int(ids.max()) >= V:
        raise WrongResult(f"ids must lie in 0..{V - 1}, got {int(ids.min())} to {int(ids.max())}.")
    ids = ids.reshape(-1, rows)  # the batch repeats the rows in order
    return torch.stack([torch.bincount(ids[:, r], minlength=V).double() / len(ids)
                        for r in range(rows)])


def _same_distribution(got, expected):
    """Total variation below 0.05 in every row (empirical frequencies of 4000 draws)."""
    if not isinstance(got, torch.Tensor) or not isinstance(expected, torch.Tensor):
        return compare(got, expected)
    if float((got - expected).abs().sum(-1).max()) / 2 < 0.05:
        return None
    return (f"the ids do not follow softmax(logits / temperature): observed frequencies "
            f"{[[round(v, 3) for v in row] for row in got.tolist()]}, expected about "
            f"{[[round(v, 3) for v in row] for row in expected.tolist()]}.")


def _sample(logits, temperature, generator, scaling="divide"):
    """One draw per row; `scaling` "multiply" and "ignore" are typical mistakes."""
    scaled = {"divide": lambda: logits / temperature, "multiply": lambda: logits * temperature,
              "ignore": lambda: logits}[scaling]()
    return torch.multinomial(torch.softmax(scaled, -1), 1, generator=generator).squeeze(-1)


def _not_greedy(case, got, expected):
    if case.args[1] == 0 and isinstance(got, torch.Tensor):
        return "temperature 0 must be greedy: always the argmax of each row (no sampling)."
    return None


check_sample_next = Check(
    "check_sample_next", "fn(logits (B, V), temperature, generator) -> ids (B,): one draw per row "
    "from softmax(logits / temperature); temperature 0 gives the argmax",
    params=("logits", "temperature", "generator"),
    reference=lambda logits, t, generator: lib("decoding.sample_next", "rnn.sample_next")(
        logits, t, generator=generator),
    call=_frequencies, compare=_same_distribution, diagnose=_not_greedy,
    cases=lambda g: [Case(f"temperature {t}; {_DRAWS} copies of the logits {_SHOWN}",
                          _LOGITS.repeat(_DRAWS, 1), t, torch.Generator().manual_seed(i))
                     for i, t in enumerate((1.0, 0.5, 2.0, 0.0), 1)],
    mistakes=[
        Mistake("the logits are multiplied by the temperature; divide them.",
                lambda lg, t, g: _sample(lg, t, g, "multiply")),
        Mistake("the temperature is ignored.", lambda lg, t, g: _sample(lg, t, g, "ignore")),
        Mistake("ids are drawn uniformly; draw them with the probabilities.",
                lambda lg, t, g: torch.randint(0, lg.shape[-1], lg.shape[:1], generator=g)),
        Mistake("temperature 0 means greedy: return the argmax (dividing by 0 gives inf and "
                "NaN probabilities).", lambda lg, t, g: _sample(lg, t, g)),
    ],
    hints=["Temperature 0 is a special case: no sampling at all.",
           "Otherwise, turn the logits divided by the temperature into probabilities over the "
           "last dim, and draw one id per row with torch.multinomial, passing the generator.",
           "torch.multinomial(probs, 1) returns shape (B, 1): remove the last dim."],
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
    for description, B, input_size, H in [("B=2, 3 inputs, 4 units", 2, 3, 4),
                                          ("one example, 5 inputs, 2 units", 1, 5, 2),
                                          ("B=4, 2 inputs, 6 units", 4, 2, 6)]:
        x, h, c = randn(g, B, input_size), randn(g, B, H, scale=0.7), randn(g, B, H, scale=1.5)
        cases.append(Case(description, x, h, c, *_params(g, input_size, H, gates=3)))
    return cases


check_coupled_lstm_cell = Check(
    "check_coupled_lstm_cell", "fn(x (B, I), h (B, H), c (B, H), W_ih (3H, I), W_hh (3H, H), b_ih, "
    "b_hh) -> (h', c'): the LSTM with coupled gates, blocks f, g, o, input gate 1 - f",
    params=("x", "h", "c", "W_ih", "W_hh", "b_ih", "b_hh"),
    reference=_coupled, cases=_coupled_cases, seed=22, outputs=("h'", "c'"),
    mistakes=[
        Mistake("the coupling is the wrong way round: f keeps the OLD cell state and 1 - f "
                "writes the candidate.", lambda *a: _coupled(*a, mistake="coupled the wrong way")),
        Mistake("the candidate is written without a gate: the input gate is not gone, it is "
                "1 - f.", lambda *a: _coupled(*a, mistake="no input gate")),
        Mistake("h' shows the squashed cell state: o * tanh(c'), not o * c'.",
                lambda *a: _coupled(*a, mistake="no tanh")),
        Mistake("the blocks are stacked f, g, o: the first H rows are the forget gate, the next "
                "H the candidate.", lambda *a: _coupled(*a, mistake="blocks g f o")),
    ],
    hints=["Start from the LSTM's equations: which of i, f, g, o is no longer computed, and "
           "what takes its place?",
           "One product of x and one of h (with their biases) give three blocks of H; two "
           "become sigmoids and one a tanh.",
           "Only the line of the cell state changes; the hidden state is computed as in the "
           "LSTM. Return both new states."],
)


# --------------------------------------------------------------------------------------
# the forget bias at which the gradient reaches 50 steps back
# --------------------------------------------------------------------------------------
_BIASES = [0.25 * k for k in range(17)]  # 0, 0.25, ..., 4


@functools.lru_cache(maxsize=64)
def _reach_at_start(bias, curve):
    """gradient_reach's `curve` of a fresh LSTM reading 50 steps, all the way back (k = 50)."""
    return lib("widgets.gradient_reach")("lstm", forget_bias=bias, steps=50)[curve][50].item()


def smallest_reaching_bias(curve="reach", threshold=1e-2, last_below=False):
    """The smallest forget bias of 0, 0.25, ..., 4 at which widgets.gradient_reach(..., steps=50)'s
    `curve` ("reach", or "forget_product": the additive path alone) exceeds `threshold` at
    k = 50. last_below=True returns the bias just before it (a typical off-by-one)."""
    previous = None
    for bias in _BIASES:
        if _reach_at_start(bias, curve) > threshold:
            return previous if last_below else bias
        previous = bias
    return float("inf")


check_reach_bias = Answer(
    "check_reach_bias", "the smallest forget-gate bias of 0, 0.25, ..., 4 at which the gradient "
    "measured by gradient_reach(..., steps=50) at initialisation still exceeds 1e-2 fifty steps back",
    quantity="the smallest forget bias (grid 0.25) with reach[50] > 1e-2 (steps=50)",
    reference=smallest_reaching_bias, tolerance=within(abs=0.2),
    mistakes=[
        Mistake("that is where the forget-gate product alone (the orange curve, or sigmoid(b) ** "
                "50) exceeds 1e-2; the measured gradient also flows through h and the gates and "
                "is larger. Measure reach, the gradient autograd computes.",
                lambda: smallest_reaching_bias("forget_product")),
        Mistake("that is the last bias at which the reach is still BELOW 1e-2; the question asks "
                "for the first one above it.", lambda: smallest_reaching_bias(last_below=True)),
    ],
    hints=["gradient_reach(\"lstm\", forget_bias=b, steps=50) returns a dict; its \"reach\" entry is a "
           "tensor indexed by k, the number of steps back.",
           "Loop over the biases in increasing order and stop at the first one whose value at "
           "k = 50 is above the threshold."],
)


# --------------------------------------------------------------------------------------
# predict, then measure: how far a GRU's gradient reaches with a large update-gate bias
# --------------------------------------------------------------------------------------
check_gru_reach_prediction = Prediction(
    "check_gru_reach_prediction", "your prediction of the gradient reaching 50 steps back in a "
    "fresh GRU whose update gates start at bias 3, against the measurement",
    quantity="||d(u . h_50) / d h_0|| of a fresh GRU with update-gate bias 3",
    tolerance=within(factor=2.0), example=0.093,
    explanation=("with bias 3 the update gates start near sigmoid(3) = 0.95, and h_t = (1 - z) * n "
                 "+ z * h_{t-1} copies the old state with that weight: the copy path alone gives "
                 "about 0.95 ** 50 = 0.09, and that is what is measured. Every other path goes "
                 "through the candidate n, which is multiplied by 1 - z = 0.05, so it adds "
                 "little. The LSTM at forget bias 3 is different: its input gate is not tied to "
                 "the forget gate (about 0.5), so the paths through i * g and the gates carry "
                 "several times the forget-gate product (the chapter's figure)."),
    mistakes=[
        Mistake("the LSTM at forget bias 3 measured several times its forget-gate product; in "
                "the GRU the paths other than the copy go through 1 - z, which is small here.",
                lambda measured: 8 * measured),
        Mistake("the update gate copies the state: with z near 0.95 the gradient decays like "
                "0.95 per step, not like the vanilla RNN's.", lambda measured: 1e-6 * measured),
    ],
    hints=["With bias 3, what is the typical value of z at initialisation, and what does the "
           "line h_t = (1 - z) * n + z * h_{t-1} do to the gradient when z is near it?",
           "Raise that factor to the 50th power; then ask whether the paths through the "
           "candidate n can add much when they are multiplied by 1 - z."],
)
