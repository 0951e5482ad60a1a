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

Parameter names, shapes, gate order (LSTM: i, f, g, o; GRU: r, z, n), state
layout and call conventions are those of torch.nn.RNNCell/LSTMCell/GRUCell and
torch.nn.RNN/LSTM/GRU, so `ours.load_state_dict(theirs.state_dict())` works
both ways and gives the same numbers. One difference: our layers default to
batch_first=True, x of shape (B, T, input_size) like the rest of the course
(torch's default is batch_first=False). Not supported: packed sequences and
LSTM projections (proj_size).

Shapes: B batch, T time steps, H hidden_size, L num_layers, D num_directions
(2 if bidirectional else 1), G the number of gate blocks (RNN 1, LSTM 4, GRU 3).
"""

import math
import numbers
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = [
    "rnn_step",
    "lstm_step",
    "gru_step",
    "RNNCell",
    "LSTMCell",
    "GRUCell",
    "RecurrentLayer",
    "RNN",
    "LSTM",
    "GRU",
    "set_forget_bias",
    "CharLM",
    "sample_next",
    "generate",
    "CHAR_LM_RECIPE",
    "train_char_lm",
]

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
# 2. Cells: one time step as a module, x (B, input_size) or (input_size,)
# ---------------------------------------------------------------------------

class _Cell(nn.Module):
    """Parameters and input checks shared by the three cells.

    weight_ih: (G*H, input_size), weight_hh: (G*H, H), bias_ih, bias_hh: (G*H,)
    (None when bias=False), all drawn from uniform(-1/sqrt(H), 1/sqrt(H)) as in torch.
    """

    num_gates = 1  # G: the number of (H, ...) blocks stacked in each weight

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__()
        _check_size("input_size", input_size)
        _check_size("hidden_size", hidden_size)
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        rows = self.num_gates * hidden_size
        factory = dict(device=device, dtype=dtype)
        self.weight_ih = nn.Parameter(torch.empty(rows, input_size, **factory))
        self.weight_hh = nn.Parameter(torch.empty(rows, hidden_size, **factory))
        if bias:
            self.bias_ih = nn.Parameter(torch.empty(rows, **factory))
            self.bias_hh = nn.Parameter(torch.empty(rows, **factory))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        _uniform_init(self.parameters(), self.hidden_size)

    def extra_repr(self):
        return _extra_repr(self, [])

    def _input_projection(self, x):
        """Check x and return (x W_ih^T + b_ih as (B, G*H), whether x was unbatched)."""
        _check_input(self, x, layouts=["(B, input_size)", "(input_size,)"], dims=(2, 1))
        unbatched = x.dim() == 1
        x = x.unsqueeze(0) if unbatched else x  # (B, input_size)
        return F.linear(x, self.weight_ih, self.bias_ih), unbatched  # (B, G*H)

    def _initial_state(self, hx, name, B, unbatched, x_proj):
        """hx checked against (B, H) (or (H,) unbatched) and returned as (B, H); zeros if None."""
        if hx is None:
            return x_proj.new_zeros(B, self.hidden_size)  # (B, H)
        expected = (self.hidden_size,) if unbatched else (B, self.hidden_size)
        layout = "(hidden_size,) for an unbatched x" if unbatched else "(B, hidden_size)"
        _check_state(self, name, hx, expected, layout)
        return hx.unsqueeze(0) if unbatched else hx  # (B, H)


class RNNCell(_Cell):
    """Elman RNN cell: h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh), act = tanh or relu.

    forward(x, hx=None): x (B, input_size) or (input_size,), hx (B, H) or (H,)
    (zeros if None)  ->  h' (B, H) or (H,)
    """

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh",
                 device=None, dtype=None):
        _check_nonlinearity(nonlinearity)
        super().__init__(input_size, hidden_size, bias, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, x, hx=None):
        x_proj, unbatched = self._input_projection(x)  # (B, H)
        h = self._initial_state(hx, "hx", x_proj.shape[0], unbatched, x_proj)  # (B, H)
        h = rnn_step(x_proj, h, self.weight_hh, self.bias_hh, self.nonlinearity)  # (B, H)
        return h.squeeze(0) if unbatched else h

    def extra_repr(self):
        return _extra_repr(self, ["nonlinearity"])


class LSTMCell(_Cell):
    """LSTM cell (gates i, f, g, o in torch's order; see `lstm_step` for the equations):

        c' = f * c + i * g,   h' = o * tanh(c')

    forward(x, hx=None): x (B, input_size) or (input_size,), hx = (h, c), each
    (B, H) or (H,) (zeros if None)  ->  (h', c'), each (B, H) or (H,)
    """

    num_gates = 4

    def forward(self, x, hx=None):
        x_proj, unbatched = self._input_projection(x)  # (B, 4H)
        B = x_proj.shape[0]
        h0, c0 = _split_lstm_state(self, hx)
        h = self._initial_state(h0, "hx[0] (h)", B, unbatched, x_proj)  # (B, H)
        c = self._initial_state(c0, "hx[1] (c)", B, unbatched, x_proj)  # (B, H)
        h, c = lstm_step(x_proj, (h, c), self.weight_hh, self.bias_hh)  # (B, H) each
        return (h.squeeze(0), c.squeeze(0)) if unbatched else (h, c)


class GRUCell(_Cell):
    """GRU cell (gates r, z, n in torch's order; see `gru_step` for the equations):

        n = tanh(W_in x + b_in + r * (W_hn h + b_hn)),   h' = (1 - z) * n + z * h

    forward(x, hx=None): x (B, input_size) or (input_size,), hx (B, H) or (H,)
    (zeros if None)  ->  h' (B, H) or (H,)
    """

    num_gates = 3

    def forward(self, x, hx=None):
        x_proj, unbatched = self._input_projection(x)  # (B, 3H)
        h = self._initial_state(hx, "hx", x_proj.shape[0], unbatched, x_proj)  # (B, H)
        h = gru_step(x_proj, h, self.weight_hh, self.bias_hh)  # (B, H)
        return h.squeeze(0) if unbatched else h


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

    and the output of layer l is the input of layer l+1. The input projection
    does not depend on the state, so it is one big matrix product outside the
    time loop instead of T small ones inside it: the loop keeps only what is
    truly sequential (h W_hh^T and the gates). With dropout > 0, dropout is
    applied to the output of every layer but the last, in training mode only,
    as in torch.

    Parameters, named as torch's: weight_ih_l{l}[_reverse] (G*H, input_size for
    l = 0 else D*H), weight_hh_l{l}[_reverse] (G*H, H), bias_ih_l{l}[_reverse]
    and bias_hh_l{l}[_reverse] (G*H,) when bias=True.

    forward(x, hx=None): x (B, T, input_size) if batch_first else (T, B, input_size),
    or (T, input_size) unbatched; hx: the initial state, (L*D, B, H) (or (L*D, H)
    unbatched), zeros if None; row l*D + d belongs to layer l, direction d.
        ->  output (B, T, D*H) if batch_first else (T, B, D*H) (or (T, D*H)), and
            the final state in hx's layout
    """

    num_gates = 1

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=True,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__()
        _check_size("input_size", input_size)
        _check_size("hidden_size", hidden_size)
        _check_size("num_layers", num_layers)
        _check_dropout(dropout, num_layers)
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional = bidirectional
        self.num_directions = 2 if bidirectional else 1
        rows, factory = self.num_gates * hidden_size, dict(device=device, dtype=dtype)
        for layer in range(num_layers):
            layer_input_size = input_size if layer == 0 else hidden_size * self.num_directions
            for direction in range(self.num_directions):
                shapes = {"weight_ih": (rows, layer_input_size), "weight_hh": (rows, hidden_size)}
                if bias:
                    shapes.update(bias_ih=(rows,), bias_hh=(rows,))
                for name, shape in shapes.items():
                    param = nn.Parameter(torch.empty(shape, **factory))
                    self.register_parameter(_param_name(name, layer, direction), param)
        self.reset_parameters()

    def reset_parameters(self):
        _uniform_init(self.parameters(), self.hidden_size)

    def extra_repr(self):
        return _extra_repr(self, ["num_layers", "batch_first", "dropout", "bidirectional"])

    def step(self, x_proj, state, weight_hh, bias_hh):
        raise NotImplementedError

    def forward(self, x, hx=None):
        x, unbatched = self._check_input(x)  # (B, T, input_size)
        hx = self._initial_state(hx, x, unbatched)  # (L*D, B, H), or a tuple of them (LSTM)
        finals = []
        for layer in range(self.num_layers):
            if layer > 0 and self.dropout > 0 and self.training:
                x = F.dropout(x, self.dropout, training=True)
            outputs = []
            for direction in range(self.num_directions):
                k = layer * self.num_directions + direction  # this (layer, direction)'s row of hx
                output, final = self._run(x, _state_row(hx, k), layer, direction)
                outputs.append(output)  # (B, T, H)
                finals.append(final)  # (B, H), or a tuple of them
            x = torch.cat(outputs, dim=-1)  # (B, T, D*H): the next layer's input
        return self._format(x, _stack_states(finals), unbatched)

    def _run(self, x, state, layer, direction):
        """Run one direction of one layer over the sequence x (B, T, in), from `state`.

        Returns the hidden states h_1..h_T as (B, T, H) and the final state.
        """
        weight_ih, weight_hh, bias_ih, bias_hh = (
            getattr(self, _param_name(name, layer, direction), None)
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
        )
        x_proj = F.linear(x, weight_ih, bias_ih)  # (B, T, G*H): all time steps at once
        x_proj = x_proj.unbind(dim=1)  # T tensors (B, G*H) (cheaper backward than x_proj[:, t])
        T = len(x_proj)
        times = reversed(range(T)) if direction == 1 else range(T)  # "_reverse" reads x backwards
        hs = [None] * T
        for t in times:
            state = self.step(x_proj[t], state, weight_hh, bias_hh)  # (B, H), or (h, c) for the LSTM
            hs[t] = state[0] if isinstance(state, tuple) else state  # h_t: (B, H)
        return torch.stack(hs, dim=1), state  # (B, T, H), final state

    # -- input and state layout ------------------------------------------------

    def _check_input(self, x):
        """Check x and return it as (B, T, input_size), and whether it was unbatched."""
        batched = "(B, T, input_size)" if self.batch_first else "(T, B, input_size)"
        _check_input(self, x, layouts=[f"{batched} (batch_first={self.batch_first})",
                                       "(T, input_size) (unbatched)"], dims=(3, 2))
        unbatched = x.dim() == 2
        T = x.shape[0] if unbatched or not self.batch_first else x.shape[1]
        if T == 0:
            raise ValueError(f"x of shape {_shape(x)} has no time steps: T must be at least 1")
        if unbatched:
            x = x.unsqueeze(0)  # (1, T, input_size)
        elif not self.batch_first:
            x = x.transpose(0, 1)  # (T, B, in) -> (B, T, in)
        return x, unbatched

    def _initial_state(self, hx, x, unbatched, name="hx"):
        """hx checked and returned as (L*D, B, H) (zeros if None)."""
        rows, B, H = self.num_layers * self.num_directions, x.shape[0], self.hidden_size
        if hx is None:
            return x.new_zeros(rows, B, H)  # (L*D, B, H)
        expected = (rows, H) if unbatched else (rows, B, H)
        layout = "(num_layers * num_directions, " + ("hidden_size) for an unbatched x"
                                                     if unbatched else "B, hidden_size)")
        _check_state(self, name, hx, expected, layout)
        return hx.unsqueeze(1) if unbatched else hx  # (L*D, B, H)

    def _format(self, output, final, unbatched):
        """Back to the caller's layout: output (B, T, D*H) and final state(s) (L*D, B, H)."""
        if unbatched:
            return output.squeeze(0), _map_state(lambda s: s.squeeze(1), final)  # (T, D*H), (L*D, H)
        if not self.batch_first:
            output = output.transpose(0, 1)  # (T, B, D*H)
        return output, final


class RNN(RecurrentLayer):
    """Elman RNN layers: h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh), act = tanh or relu.

    RNN(input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
        batch_first=True, dropout=0.0, bidirectional=False)
    forward(x, hx=None) -> (output, h_n); shapes and parameters in `RecurrentLayer`.
    """

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=True, dropout=0.0, bidirectional=False, device=None, dtype=None):
        _check_nonlinearity(nonlinearity)
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, device=device, dtype=dtype)

    def step(self, x_proj, h, weight_hh, bias_hh):
        return rnn_step(x_proj, h, weight_hh, bias_hh, self.nonlinearity)

    def extra_repr(self):
        return _extra_repr(self, ["num_layers", "nonlinearity", "batch_first", "dropout",
                                  "bidirectional"])


class LSTM(RecurrentLayer):
    """LSTM layers: `lstm_step` (gates i, f, g, o) looped over time.

    LSTM(input_size, hidden_size, num_layers=1, bias=True, batch_first=True,
         dropout=0.0, bidirectional=False)
    forward(x, hx=None): hx = (h_0, c_0), each (L*D, B, H) (zeros if None)
        ->  (output, (h_n, c_n)); shapes and parameters in `RecurrentLayer`.
    """

    num_gates = 4

    def step(self, x_proj, state, weight_hh, bias_hh):
        return lstm_step(x_proj, state, weight_hh, bias_hh)

    def _initial_state(self, hx, x, unbatched):
        h0, c0 = _split_lstm_state(self, hx)
        h0 = super()._initial_state(h0, x, unbatched, name="hx[0] (h_0)")  # (L*D, B, H)
        c0 = super()._initial_state(c0, x, unbatched, name="hx[1] (c_0)")  # (L*D, B, H)
        return h0, c0


class GRU(RecurrentLayer):
    """GRU layers: `gru_step` (gates r, z, n) looped over time.

    GRU(input_size, hidden_size, num_layers=1, bias=True, batch_first=True,
        dropout=0.0, bidirectional=False)
    forward(x, hx=None) -> (output, h_n); shapes and parameters in `RecurrentLayer`.
    """

    num_gates = 3

    def step(self, x_proj, h, weight_hh, bias_hh):
        return gru_step(x_proj, h, weight_hh, bias_hh)


# ---------------------------------------------------------------------------
# 4. A character-level language model, and sampling from it
# ---------------------------------------------------------------------------

LAYERS = {"rnn": RNN, "lstm": LSTM, "gru": GRU}


def set_forget_bias(lstm, value):
    """Set the forget gate's bias of every layer and direction of an LSTM (or LSTMCell) to `value`.

    The gate sees b_if + b_hf (both biases are added), so the forget block
    (rows H..2H, gate order i, f, g, o) of bias_ih is set to `value` and that of
    bias_hh to 0. With value = 1, f = sigmoid(1 + ...) is about 0.73 at the
    start of training: the cell keeps most of its memory by default
    (Gers et al., 2000; Jozefowicz et al., 2015).
    """
    if not isinstance(lstm, (LSTM, LSTMCell)):
        raise TypeError(f"lstm must be a course_lib LSTM or LSTMCell, got {type(lstm).__name__}")
    if not lstm.bias:
        raise ValueError("this LSTM was built with bias=False: it has no forget-gate bias to set")
    H = lstm.hidden_size
    with torch.no_grad():
        for name, param in lstm.named_parameters():
            if name.startswith("bias_ih"):
                param[H:2 * H] = value  # the f block of b_ih
            elif name.startswith("bias_hh"):
                param[H:2 * H] = 0.0  # the f block of b_hh
    return lstm


class CharLM(nn.Module):
    """Next-character model: embedding, recurrent layers, linear read-out.

        e_t      = E[x_t]                      (B, T, embed_size)
        h_t      = recurrent(e_1, ..., e_t)    (B, T, H)    kind: "rnn", "lstm" or "gru"
        logits_t = h_t W_out^T + b_out         (B, T, V)    scores for the next character x_{t+1}

    forward(x, hx=None, return_state=False): x (B, T) character ids -> logits (B, T, V),
    and the final state too if return_state (to continue reading where x stopped).
    forget_bias (LSTM only): the initial forget-gate bias, see `set_forget_bias`.
    """

    def __init__(self, vocab_size, kind="lstm", embed_size=32, hidden_size=128, num_layers=1,
                 forget_bias=None):
        super().__init__()
        if kind not in LAYERS:
            raise ValueError(f"kind must be one of {sorted(LAYERS)}, got {kind!r}")
        _check_size("vocab_size", vocab_size)
        self.kind = kind
        self.embed = nn.Embedding(vocab_size, embed_size)
        self.rnn = LAYERS[kind](embed_size, hidden_size, num_layers)
        self.head = nn.Linear(hidden_size, vocab_size)
        if forget_bias is not None:
            if kind != "lstm":
                raise ValueError(f"forget_bias is for kind='lstm' only, got kind={kind!r}")
            set_forget_bias(self.rnn, forget_bias)

    def forward(self, x, hx=None, return_state=False):
        if not isinstance(x, torch.Tensor) or x.dtype != torch.long or x.dim() != 2:
            got = f"{_shape(x)} {x.dtype}" if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"x must be a (B, T) tensor of character ids (torch.long), got {got}")
        h, state = self.rnn(self.embed(x), hx)  # (B, T, H)
        logits = self.head(h)  # (B, T, V)
        return (logits, state) if return_state else logits


def sample_next(logits, temperature=1.0, generator=None):
    """Draw one id per row from softmax(logits / temperature).

    temperature 1 samples the model's own distribution; below 1 sharpens it
    (towards the most likely id), above 1 flattens it (towards uniform); 0 is
    the limit: the argmax (greedy decoding).

    logits: (B, V) -> ids: (B,) long
    """
    if not isinstance(temperature, numbers.Real) or temperature < 0:
        raise ValueError(f"temperature must be a number >= 0, got {temperature!r}")
    if temperature == 0:
        return logits.argmax(dim=-1)  # (B,)
    probs = torch.softmax(logits / temperature, dim=-1)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)  # (B,)


@torch.no_grad()
def generate(model, vocab, prompt, length, temperature=1.0, num_samples=1, generator=None):
    """Continue `prompt` by `length` sampled characters, `num_samples` times.

    The model reads the prompt once, then feeds each sampled character back in,
    carrying its state. Returns a list of num_samples strings (prompt included).
    """
    if not prompt:
        raise ValueError("prompt must hold at least one character")
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    x = torch.tensor([vocab.encode(prompt)] * num_samples, device=device)  # (N, P)
    logits, state = model(x, return_state=True)  # (N, P, V)
    sampled = []
    for _ in range(length):
        nxt = sample_next(logits[:, -1], temperature, generator)  # (N,)
        sampled.append(nxt)
        logits, state = model(nxt[:, None], state, return_state=True)  # (N, 1, V)
    model.train(was_training)
    ids = torch.stack(sampled, dim=1).tolist() if sampled else [[]] * num_samples
    return [prompt + vocab.decode(row) for row in ids]


CHAR_LM_RECIPE = {
    "rnn": dict(steps=410),
    "gru": dict(steps=170),
    "lstm": dict(steps=150, forget_bias=1.0),
}
"""The chapter's comparison at an equal time budget: steps per model, calibrated so that each
trains for about 4 s on the course's 2-core reference CPU with one thread (measured per step:
RNN ~10 ms, GRU ~23 ms, LSTM ~27 ms), and the LSTM's initial forget-gate bias. Shared by
book/02_lstm_and_gru.ipynb and benchmarks/bench_rnn.py."""


def train_char_lm(kind, corpus, steps, batch_size=32, seq_len=64, lr=1e-2, hidden_size=128,
                  embed_size=32, forget_bias=None, seed=0, eval_every=0, eval_chars=None,
                  progress=True):
    """The course's character-level language model recipe: Adam, clipped gradients,
    random windows of the training text, cross-entropy of the next character.

    corpus: a course_lib.data.CharCorpus. Every `eval_every` steps (and at the end)
    the validation loss (nats per character) is recorded in history.evals, on the
    first `eval_chars` characters of corpus.val (all if None).
    Returns (model, history) with history as in course_lib.train.fit.
    """
    from .data import lm_batch
    from .train import fit, lm_heldout_loss, seed_everything

    seed_everything(seed)
    model = CharLM(len(corpus.vocab), kind, embed_size, hidden_size, forget_bias=forget_bias)
    g = torch.Generator().manual_seed(seed)
    val = corpus.val if eval_chars is None else corpus.val[:eval_chars]

    def loss_fn(model, batch):
        x, y = batch  # (B, T) each
        return F.cross_entropy(model(x).flatten(0, 1), y.flatten())  # mean nats per character

    history = fit(model, loss_fn, lambda step: lm_batch(corpus.train, batch_size, seq_len, g),
                  steps=steps, lr=lr, clip=1.0, eval_fn=lambda m: lm_heldout_loss(m, val),
                  eval_every=eval_every, progress=progress, desc=kind.upper())
    return model, history


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


def _map_state(fn, state):
    """fn applied to the state: a tensor, or each tensor of the LSTM's (h, c)."""
    return tuple(fn(s) for s in state) if isinstance(state, tuple) else fn(state)


def _state_row(hx, k):
    """Row k of the state: hx[k] (B, H), or (h[k], c[k]) for the LSTM."""
    return _map_state(lambda s: s[k], hx)


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


# ---------------------------------------------------------------------------
# Input checks: each raises a ValueError/TypeError naming the argument and shapes.
# ---------------------------------------------------------------------------

def _shape(x):
    return str(tuple(x.shape))


def _check_size(name, n):
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(n).__name__}")
    if n <= 0:
        raise ValueError(f"{name} must be a positive int, got {n}")


def _check_nonlinearity(nonlinearity):
    if nonlinearity not in NONLINEARITIES:
        raise ValueError(f"nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")


def _check_dropout(dropout, num_layers):
    if isinstance(dropout, bool) or not isinstance(dropout, numbers.Real) or not 0 <= dropout <= 1:
        raise ValueError(f"dropout must be a probability between 0 and 1, got {dropout!r}")
    if dropout > 0 and num_layers == 1:
        warnings.warn(
            f"dropout={dropout} has no effect with num_layers=1: dropout is applied to the "
            f"output of every layer but the last", stacklevel=3)


def _check_tensor(module, name, x):
    """x must be a floating-point tensor of the module's parameters' dtype."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    dtype = next(module.parameters()).dtype
    if x.dtype != dtype:
        raise TypeError(
            f"{name} has dtype {x.dtype} but the {type(module).__name__}'s parameters are "
            f"{dtype}: convert one of them (e.g. x.to({dtype}) or module.to({x.dtype}))"
        )


def _check_input(module, x, layouts, dims):
    """x must have one of `dims` dims and input_size features in its last dim."""
    _check_tensor(module, "x", x)
    if x.dim() not in dims:
        raise ValueError(f"x must have shape {' or '.join(layouts)}, got shape {_shape(x)}")
    if x.shape[-1] != module.input_size:
        raise ValueError(
            f"x has {x.shape[-1]} features but the {type(module).__name__} was built with "
            f"input_size={module.input_size} (x has shape {_shape(x)}, expected "
            f"{' or '.join(layouts)} with input_size={module.input_size})"
        )


def _check_state(module, name, h, expected, layout):
    """An initial state must be a tensor of shape `expected`."""
    _check_tensor(module, name, h)
    if tuple(h.shape) != tuple(expected):
        raise ValueError(
            f"{name} has shape {_shape(h)} but the {type(module).__name__} expects {layout} "
            f"= {tuple(expected)} for x of this shape"
        )


def _split_lstm_state(module, hx):
    """hx = (h, c) or None -> h, c (either may be None only if hx is None)."""
    if hx is None:
        return None, None
    if not isinstance(hx, (tuple, list)) or len(hx) != 2:
        got = f"a tuple of {len(hx)}" if isinstance(hx, (tuple, list)) else type(hx).__name__
        raise TypeError(f"hx must be a tuple (h, c) for the {type(module).__name__}, got {got}")
    return hx
