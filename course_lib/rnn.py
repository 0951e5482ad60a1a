"""Recurrent networks from their equations: the Elman RNN, the LSTM and the GRU.

A recurrent network reads a sequence x_1, ..., x_T one step at a time and
carries a state from step to step:

    h_t = step(x_t, h_{t-1})          (for the LSTM the state is the pair (h_t, c_t))

The three networks differ only in `step`. Each step starts with two affine maps,
one of the input and one of the previous state,

    x_t W_ih^T + b_ih        and        h_{t-1} W_hh^T + b_hh

and combines them with gates. The first map does not depend on the state, so
this module splits every step into (1) the input projection, done once for all
time steps of a sequence, and (2) a step function `rnn_step`, `lstm_step` or
`gru_step` that applies the recurrence to the projection. The cells
(`RNNCell`, `LSTMCell`, `GRUCell`) run one step; the layers (`RNN`, `LSTM`,
`GRU`) share one implementation, `RecurrentLayer`, that loops over time (both
ways when bidirectional) and stacks layers.

Parameter names, shapes, gate order (LSTM: i, f, g, o; GRU: r, z, n), state layout and call
conventions are those of torch.nn.RNNCell/LSTMCell/GRUCell and torch.nn.RNN/LSTM/GRU, so
`ours.load_state_dict(theirs.state_dict())` works both ways and gives the same numbers.
Differences: our layers default to batch_first=True, x of shape (B, T, input_size) like the rest
of the course (torch's default is batch_first=False); inputs must have a batch dimension (x[None]
adds one). Not supported: packed sequences, LSTM projections (proj_size), and the device/dtype
constructor arguments (use .to()).

Shapes: B batch, T time steps, H hidden_size, L num_layers, D num_directions
(2 if bidirectional else 1), G the number of gate blocks (RNN 1, LSTM 4, GRU 3).
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._checks import (check_bool, check_dropout, check_int, check_lstm_state, check_nonlinearity,
                      check_rnn_input, check_rnn_state, shape_of)

__all__ = ["rnn_step", "lstm_step", "gru_step", "RNNCell", "LSTMCell", "GRUCell", "RecurrentLayer",
           "RNN", "LSTM", "GRU", "set_forget_bias", "set_update_bias"]

NONLINEARITIES = {"tanh": torch.tanh, "relu": torch.relu}


# ---------------------------------------------------------------------------
# 1. One time step, given the input's projection x_proj = x W_ih^T + b_ih
# ---------------------------------------------------------------------------

def rnn_step(x_proj, h, weight_hh, bias_hh=None, nonlinearity="tanh"):
    """One step of the Elman RNN:

        h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh),   act = tanh or relu

    x_proj = x W_ih^T + b_ih: (B, H), h: (B, H), weight_hh: (H, H), bias_hh: (H,) or None
        ->  h': (B, H)
    """
    act = NONLINEARITIES[nonlinearity]
    return act(x_proj + F.linear(h, weight_hh, bias_hh))  # (B, H)


def lstm_step(x_proj, state, weight_hh, bias_hh=None):
    """One step of the LSTM (Hochreiter & Schmidhuber, 1997, with a forget gate):

        i  = sigmoid(W_ii x + b_ii + W_hi h + b_hi)     input gate:  how much to write
        f  = sigmoid(W_if x + b_if + W_hf h + b_hf)     forget gate: how much to keep
        g  =    tanh(W_ig x + b_ig + W_hg h + b_hg)     candidate:   what to write
        o  = sigmoid(W_io x + b_io + W_ho h + b_ho)     output gate: how much to show
        c' = f * c + i * g
        h' = o * tanh(c')

    W_ih stacks [W_ii; W_if; W_ig; W_io] (torch's order i, f, g, o), likewise
    W_hh, b_ih and b_hh, so one matrix product gives all four gates.

    x_proj = x W_ih^T + b_ih: (B, 4H), state = (h, c): (B, H) each,
    weight_hh: (4H, H), bias_hh: (4H,) or None  ->  (h', c'): (B, H) each
    """
    h, c = state
    gates = x_proj + F.linear(h, weight_hh, bias_hh)  # (B, 4H)
    i, f, g, o = gates.chunk(4, dim=-1)  # (B, H) each
    i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
    c = f * c + i * g  # (B, H): keep part of the old memory, write part of the new
    h = o * torch.tanh(c)  # (B, H)
    return h, c


def gru_step(x_proj, h, weight_hh, bias_hh=None):
    """One step of the GRU (Cho et al., 2014), exactly as torch computes it:

        r  = sigmoid(W_ir x + b_ir + W_hr h + b_hr)          reset gate
        z  = sigmoid(W_iz x + b_iz + W_hz h + b_hz)          update gate
        n  =    tanh(W_in x + b_in + r * (W_hn h + b_hn))    candidate
        h' = (1 - z) * n + z * h

    The reset gate multiplies W_hn h + b_hn, after the matrix product (the
    paper's other variant resets h before it), so the two projections are
    split into their r, z, n blocks before they are added.

    x_proj = x W_ih^T + b_ih: (B, 3H), h: (B, H), weight_hh: (3H, H),
    bias_hh: (3H,) or None  ->  h': (B, H)
    """
    x_r, x_z, x_n = x_proj.chunk(3, dim=-1)  # (B, H) each
    h_r, h_z, h_n = F.linear(h, weight_hh, bias_hh).chunk(3, dim=-1)  # (B, H) each
    r = torch.sigmoid(x_r + h_r)  # (B, H)
    z = torch.sigmoid(x_z + h_z)  # (B, H)
    n = torch.tanh(x_n + r * h_n)  # (B, H)
    return (1 - z) * n + z * h  # (B, H)


# ---------------------------------------------------------------------------
# 2. Cells: one time step as a module, x (B, input_size)
# ---------------------------------------------------------------------------

class _Cell(nn.Module):
    """Parameters and input checks shared by the three cells.

    weight_ih: (G*H, input_size), weight_hh: (G*H, H), bias_ih, bias_hh: (G*H,)
    (None when bias=False), all drawn from uniform(-1/sqrt(H), 1/sqrt(H)) as in torch.
    """

    num_gates = 1  # G: the number of (H, ...) blocks stacked in each weight

    def __init__(self, input_size, hidden_size, bias=True):
        super().__init__()
        self.input_size = check_int("input_size", input_size)
        self.hidden_size = check_int("hidden_size", hidden_size)
        self.bias = check_bool("bias", bias)
        rows = self.num_gates * hidden_size
        self.weight_ih = nn.Parameter(torch.empty(rows, input_size))
        self.weight_hh = nn.Parameter(torch.empty(rows, hidden_size))
        self.bias_ih = nn.Parameter(torch.empty(rows)) if bias else None
        self.bias_hh = nn.Parameter(torch.empty(rows)) if bias else None
        _uniform_init(self.parameters(), hidden_size)

    def extra_repr(self):
        return _extra_repr(self, [])

    def forward(self, x, hx=None):
        """Check x and hx (zeros if None), then run `_forward` (which course_lib's models call)."""
        check_rnn_input(self, x, layouts=["(B, input_size)"], dims=(2,))
        return self._forward(x, self._checked_state(hx, x))

    def _checked_state(self, h, x, name="hx"):
        """h checked as (B, H), or zeros (B, H) if None."""
        if h is None:
            return x.new_zeros(x.shape[0], self.hidden_size)  # (B, H)
        check_rnn_state(self, name, h, (x.shape[0], self.hidden_size), "(B, hidden_size)")
        return h


class RNNCell(_Cell):
    """Elman RNN cell: h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh), act = tanh or relu.

    forward(x (B, input_size), hx (B, H) or None for zeros) -> h' (B, H)
    """

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh"):
        check_nonlinearity(nonlinearity)
        super().__init__(input_size, hidden_size, bias)
        self.nonlinearity = nonlinearity

    def _forward(self, x, h):
        x_proj = F.linear(x, self.weight_ih, self.bias_ih)  # (B, H)
        return rnn_step(x_proj, h, self.weight_hh, self.bias_hh, self.nonlinearity)  # (B, H)

    def extra_repr(self):
        return _extra_repr(self, ["nonlinearity"])


class LSTMCell(_Cell):
    """LSTM cell (gates i, f, g, o in torch's order; see `lstm_step` for the equations):

        c' = f * c + i * g,   h' = o * tanh(c')

    forward(x (B, input_size), hx = (h, c) each (B, H), or None for zeros) -> (h', c')
    """

    num_gates = 4

    def _checked_state(self, hx, x):
        B, H = x.shape[0], self.hidden_size
        h, c = check_lstm_state(self, hx, (B, H), "(B, hidden_size)", ("hx[0] (h)", "hx[1] (c)"))
        return (x.new_zeros(B, H) if h is None else h), (x.new_zeros(B, H) if c is None else c)

    def _forward(self, x, state):
        x_proj = F.linear(x, self.weight_ih, self.bias_ih)  # (B, 4H)
        return lstm_step(x_proj, state, self.weight_hh, self.bias_hh)  # (B, H) each


class GRUCell(_Cell):
    """GRU cell (gates r, z, n in torch's order; see `gru_step` for the equations):

        n = tanh(W_in x + b_in + r * (W_hn h + b_hn)),   h' = (1 - z) * n + z * h

    forward(x (B, input_size), hx (B, H) or None for zeros) -> h' (B, H)
    """

    num_gates = 3

    def _forward(self, x, h):
        x_proj = F.linear(x, self.weight_ih, self.bias_ih)  # (B, 3H)
        return gru_step(x_proj, h, self.weight_hh, self.bias_hh)  # (B, H)


# ---------------------------------------------------------------------------
# 3. Layers: the step function looped over time, both ways, layer on layer
# ---------------------------------------------------------------------------

class RecurrentLayer(nn.Module):
    """A multi-layer, optionally bidirectional recurrent network, generic in its step.

    Subclasses set `num_gates` (G) and `step(x_proj, state, weight_hh, bias_hh)`.
    For every layer l and direction (forward, then "_reverse" when bidirectional):

        x_proj = x W_ih^T + b_ih                 all T steps at once: (B, T, G*H)
        state_t = step(x_proj[:, t], state_{t-1}, W_hh, b_hh)   t = 1..T, or T..1 reversed
        output[:, t] = h_t                       forward and reverse h_t concatenated: (B, T, D*H)

    and the output of layer l is the input of layer l+1. The input projection does not depend on
    the state, so it is one matrix product outside the time loop instead of T small ones inside
    it: the loop keeps only what is truly sequential (h W_hh^T and the gates). With dropout > 0,
    dropout is applied to the output of every layer but the last, in training mode only, as in torch.

    Parameters, named as torch's: weight_ih_l{l}[_reverse] (G*H, input_size for l = 0 else D*H),
    weight_hh_l{l}[_reverse] (G*H, H), bias_ih_l{l}[_reverse] and bias_hh_l{l}[_reverse] (G*H,) if bias.

    forward(x, hx=None): x (B, T, input_size) if batch_first else (T, B, input_size);
    hx: the initial state (L*D, B, H), zeros if None; row l*D + d is layer l, direction d.
        ->  output (B, T, D*H) (or (T, B, D*H)), final state (L*D, B, H)
    """

    num_gates = 1

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=True,
                 dropout=0.0, bidirectional=False):
        super().__init__()
        self.input_size = check_int("input_size", input_size)
        self.hidden_size = check_int("hidden_size", hidden_size)
        self.num_layers = check_int("num_layers", num_layers)
        self.bias = check_bool("bias", bias)
        self.batch_first = check_bool("batch_first", batch_first)
        self.bidirectional = check_bool("bidirectional", bidirectional)
        self.dropout = check_dropout(dropout, num_layers)
        self.num_directions = 2 if bidirectional else 1
        rows = self.num_gates * hidden_size
        for layer in range(num_layers):
            layer_input_size = input_size if layer == 0 else hidden_size * self.num_directions
            for direction in range(self.num_directions):
                shapes = {"weight_ih": (rows, layer_input_size), "weight_hh": (rows, hidden_size)}
                if bias:
                    shapes.update(bias_ih=(rows,), bias_hh=(rows,))
                for name, shape in shapes.items():
                    self.register_parameter(_param_name(name, layer, direction),
                                            nn.Parameter(torch.empty(shape)))
        _uniform_init(self.parameters(), hidden_size)

    def extra_repr(self):
        return _extra_repr(self, ["num_layers", "batch_first", "dropout", "bidirectional"])

    def forward(self, x, hx=None):
        """Check x and hx, then run `_forward` (which course_lib's models call)."""
        self._check_inputs(x, hx)
        return self._forward(x, hx)

    def _forward(self, x, hx=None):
        """The layers' arithmetic (see the class docstring), inputs unchecked."""
        x = x if self.batch_first else x.transpose(0, 1)  # (B, T, input_size)
        hx = self._initial_state(hx, x)  # (L*D, B, H), or a tuple (h, c) of them for the LSTM
        finals = []
        for layer in range(self.num_layers):
            if layer > 0 and self.dropout > 0 and self.training:
                x = F.dropout(x, self.dropout, training=True)
            outputs = []
            for direction in range(self.num_directions):
                k = layer * self.num_directions + direction  # this (layer, direction)'s row of hx
                state = tuple(s[k] for s in hx) if isinstance(hx, tuple) else hx[k]  # (B, H), or (h, c)
                output, final = self._run(x, state, layer, direction)
                outputs.append(output)  # (B, T, H)
                finals.append(final)  # (B, H), or a tuple of them
            x = torch.cat(outputs, dim=-1)  # (B, T, D*H): the next layer's input
        return (x if self.batch_first else x.transpose(0, 1)), _stack_states(finals)

    def _run(self, x, state, layer, direction):
        """One direction of one layer over x (B, T, in) from `state` -> h_1..h_T (B, T, H), final state."""
        weight_ih, weight_hh, bias_ih, bias_hh = (
            getattr(self, _param_name(name, layer, direction), None)
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
        x_proj = F.linear(x, weight_ih, bias_ih).unbind(dim=1)  # T tensors (B, G*H), all at once
        T = len(x_proj)
        hs = [None] * T
        for t in (reversed(range(T)) if direction == 1 else range(T)):  # "_reverse" reads backwards
            state = self.step(x_proj[t], state, weight_hh, bias_hh)  # (B, H), or (h, c) for the LSTM
            hs[t] = state[0] if isinstance(state, tuple) else state  # h_t: (B, H)
        return torch.stack(hs, dim=1), state  # (B, T, H), final state

    def _initial_state(self, hx, x):
        """hx, or zeros (L*D, B, H) if None; x (B, T, input_size)."""
        shape = (self.num_layers * self.num_directions, x.shape[0], self.hidden_size)  # (L*D, B, H)
        return x.new_zeros(shape) if hx is None else hx

    def _check_inputs(self, x, hx):
        """x (B, T, input_size) (or (T, B, input_size)) with T >= 1; hx (L*D, B, H) or None."""
        layout = "(B, T, input_size)" if self.batch_first else "(T, B, input_size)"
        check_rnn_input(self, x, layouts=[f"{layout} (batch_first={self.batch_first})"], dims=(3,))
        if x.shape[1 if self.batch_first else 0] == 0:
            raise ValueError(f"x of shape {shape_of(x)} has no time steps: T must be at least 1")
        B = x.shape[0 if self.batch_first else 1]
        self._check_state(hx, (self.num_layers * self.num_directions, B, self.hidden_size))

    def _check_state(self, hx, expected, layout="(num_layers * num_directions, B, hidden_size)"):
        if hx is not None:
            check_rnn_state(self, "hx", hx, expected, layout)


class RNN(RecurrentLayer):
    """Elman RNN layers: h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh), act = tanh or relu.

    RNN(input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
        batch_first=True, dropout=0.0, bidirectional=False)
    forward(x, hx=None) -> (output, h_n); shapes and parameters in `RecurrentLayer`.
    """

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=True, dropout=0.0, bidirectional=False):
        check_nonlinearity(nonlinearity)
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional)

    def step(self, x_proj, h, weight_hh, bias_hh):
        return rnn_step(x_proj, h, weight_hh, bias_hh, self.nonlinearity)

    def extra_repr(self):
        return _extra_repr(self, ["num_layers", "nonlinearity", "batch_first", "dropout", "bidirectional"])


class LSTM(RecurrentLayer):
    """LSTM layers: `lstm_step` (gates i, f, g, o) looped over time.

    LSTM(input_size, hidden_size, num_layers=1, bias=True, batch_first=True, dropout=0.0, bidirectional=False)
    forward(x, hx=None): hx = (h_0, c_0), each (L*D, B, H) (zeros if None)
        ->  (output, (h_n, c_n)); shapes and parameters in `RecurrentLayer`.
    """

    num_gates = 4

    def step(self, x_proj, state, weight_hh, bias_hh):
        return lstm_step(x_proj, state, weight_hh, bias_hh)

    def _initial_state(self, hx, x):
        h0, c0 = (None, None) if hx is None else hx
        return super()._initial_state(h0, x), super()._initial_state(c0, x)  # (L*D, B, H) each

    def _check_state(self, hx, expected, layout="(num_layers * num_directions, B, hidden_size)"):
        check_lstm_state(self, hx, expected, layout, ("hx[0] (h_0)", "hx[1] (c_0)"))


class GRU(RecurrentLayer):
    """GRU layers: `gru_step` (gates r, z, n) looped over time.

    GRU(input_size, hidden_size, num_layers=1, bias=True, batch_first=True, dropout=0.0, bidirectional=False)
    forward(x, hx=None) -> (output, h_n); shapes and parameters in `RecurrentLayer`.
    """

    num_gates = 3

    def step(self, x_proj, h, weight_hh, bias_hh):
        return gru_step(x_proj, h, weight_hh, bias_hh)


# ---------------------------------------------------------------------------
# 4. The bias of the gate that keeps the memory: the LSTM's forget gate, the GRU's update gate
# ---------------------------------------------------------------------------

def set_forget_bias(lstm, value):
    """Set the forget gate's bias of every layer and direction of an LSTM (or LSTMCell) to `value`.

    The gate sees b_if + b_hf (both biases are added), so the forget block
    (rows H..2H, gate order i, f, g, o) of bias_ih is set to `value` and that of
    bias_hh to 0. With value = 1, f = sigmoid(1 + ...) is about 0.73 at the
    start of training: the cell keeps most of its memory by default
    (Gers et al., 2000; Jozefowicz et al., 2015). Works on course_lib's and torch's
    LSTM and LSTMCell (same parameter names).
    """
    if not isinstance(lstm, (LSTM, LSTMCell, nn.LSTM, nn.LSTMCell)):
        raise TypeError(f"lstm must be an LSTM or LSTMCell (course_lib or torch), got {type(lstm).__name__}")
    return _set_second_block_bias(lstm, value, "forget")


def set_update_bias(gru, value):
    """Set the update gate's bias of every layer and direction of a GRU (or GRUCell) to `value`.

    The GRU's counterpart of the forget bias: h' = (1 - z) * n + z * h copies the old
    state with weight z. The gate sees b_iz + b_hz, so the update block (rows H..2H,
    gate order r, z, n) of bias_ih is set to `value` and that of bias_hh to 0. With
    value = 1, z = sigmoid(1 + ...) is about 0.73 at the start of training, the keep
    rate that forget bias 1 gives an LSTM. Works on course_lib's and torch's GRU and GRUCell.
    """
    if not isinstance(gru, (GRU, GRUCell, nn.GRU, nn.GRUCell)):
        raise TypeError(f"gru must be a GRU or GRUCell (course_lib or torch), got {type(gru).__name__}")
    return _set_second_block_bias(gru, value, "update")


def _set_second_block_bias(layer, value, gate):
    """Rows H..2H of every bias_ih* to `value`, of every bias_hh* to 0 (the LSTM's f, the GRU's z)."""
    if not layer.bias:
        raise ValueError(f"this layer was built with bias=False: it has no {gate}-gate bias to set")
    H = layer.hidden_size
    with torch.no_grad():
        for name, param in layer.named_parameters():
            if name.startswith("bias_ih"):
                param[H:2 * H] = value  # the second gate block of b_ih
            elif name.startswith("bias_hh"):
                param[H:2 * H] = 0.0  # the same block of b_hh
    return layer


# ---------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------

def _param_name(name, layer, direction):
    """torch's parameter names: weight_ih_l0, bias_hh_l1_reverse, ..."""
    return f"{name}_l{layer}" + ("_reverse" if direction == 1 else "")


def _uniform_init(params, hidden_size):
    """torch's initialisation of every RNN weight and bias: uniform(-1/sqrt(H), 1/sqrt(H))."""
    bound = 1 / math.sqrt(hidden_size)
    for p in params:
        nn.init.uniform_(p, -bound, bound)


def _stack_states(states):
    """[state of each (layer, direction)] -> (L*D, B, H), or a tuple of them for the LSTM."""
    if isinstance(states[0], tuple):
        return tuple(torch.stack(parts) for parts in zip(*states))
    return torch.stack(states)


def _extra_repr(module, options):
    text = f"{module.input_size}, {module.hidden_size}"
    defaults = {"num_layers": 1, "nonlinearity": "tanh", "batch_first": True, "dropout": 0.0,
                "bidirectional": False}
    for name in options:
        if getattr(module, name) != defaults[name]:
            text += f", {name}={getattr(module, name)!r}"
    return text + ("" if module.bias else ", bias=False")
