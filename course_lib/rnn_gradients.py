"""How far a gradient reaches back through a recurrent network (chapters 1 and 2).

Chapter 1: in a vanilla RNN h_t = act(x_proj_t + h_{t-1} W_hh^T) the gradient that flows back
from h_t to h_0 is multiplied by one Jacobian per step,

    dh_t/dh_{t-1} = diag(act'(a_t)) W_hh,

so its norm grows or shrinks geometrically with the gain of W_hh (:func:`hidden_jacobians`,
:func:`jacobian_norms`, with W_hh = gain x a random orthogonal matrix,
:func:`orthogonal_recurrent_weight`).

Chapter 2: how much gradient reaches k steps back in a fresh RNN, GRU or LSTM cell, and for the
LSTM the product of forget gates along its additive path c_t = f_t * c_{t-1} + ...
(:func:`gradient_reach`).

The explorers of ``course_lib.widgets.rnn`` draw these numbers; ``course_lib.widgets``
re-exports the functions under the names the chapters use.
"""

from __future__ import annotations

import torch

from . import rnn

__all__ = ["gradient_reach", "geometric_mean", "hidden_jacobians", "jacobian_norms",
           "orthogonal_recurrent_weight"]


def geometric_mean(norms, dim=-1):
    """exp(mean(log x)): the typical size of quantities that grow or shrink geometrically."""
    return norms.clamp_min(1e-300).log().mean(dim).exp()


_ACTIVATIONS = {
    # name: (act(a), act'(a))
    "tanh": (torch.tanh, lambda a: 1 - torch.tanh(a) ** 2),
    "linear": (lambda a: a, torch.ones_like),
    "relu": (torch.relu, lambda a: (a > 0).to(a.dtype)),
}


def orthogonal_recurrent_weight(hidden_size, gain, seed=0, dtype=torch.float64):
    """W_hh = gain * Q with Q a random orthogonal matrix: every singular value equals `gain`.

    -> (H, H)
    """
    g = torch.Generator().manual_seed(seed)
    q, r = torch.linalg.qr(torch.randn(hidden_size, hidden_size, generator=g, dtype=dtype))
    q = q * torch.sign(torch.diagonal(r))  # a uniformly random orthogonal matrix
    return gain * q


def hidden_jacobians(weight_hh, x_proj, nonlinearity="tanh"):
    """The Jacobians dh_t/dh_0, t = 1..T, of h_t = act(x_proj_t + h_{t-1} W_hh^T), from h_0 = 0.

    The chain rule (backpropagation through time) multiplies one factor per step:

        dh_t/dh_{t-1} = diag(act'(a_t)) W_hh,      a_t = x_proj_t + h_{t-1} W_hh^T
        dh_t/dh_0     = diag(act'(a_t)) W_hh  ...  diag(act'(a_1)) W_hh

    weight_hh: (H, H), x_proj: (B, T, H) the projected inputs  ->  (T, B, H, H)
    """
    if nonlinearity not in _ACTIVATIONS:
        raise ValueError(f"nonlinearity must be one of {sorted(_ACTIVATIONS)}, got {nonlinearity!r}")
    act, act_grad = _ACTIVATIONS[nonlinearity]
    B, T, H = x_proj.shape
    h = x_proj.new_zeros(B, H)  # (B, H)
    jac = torch.eye(H, dtype=x_proj.dtype).expand(B, H, H)  # dh_0/dh_0 = I: (B, H, H)
    jacobians = []
    for t in range(T):
        a = x_proj[:, t] + h @ weight_hh.T  # (B, H)
        h = act(a)
        jac = act_grad(a).unsqueeze(-1) * (weight_hh @ jac)  # diag(act'(a_t)) W_hh (dh_{t-1}/dh_0)
        jacobians.append(jac)
    return torch.stack(jacobians)  # (T, B, H, H)


def jacobian_norms(gain, nonlinearity="tanh", steps=100, hidden_size=32, batch=8,
                   input_scale=0.5, seed=0):
    """||dh_t/dh_0||_2 (spectral norm) for t = 0..steps, W_hh = gain * orthogonal.

    The inputs' projections x_proj_t are random with standard deviation
    `input_scale`. Returns (steps + 1,) float64: the geometric mean over `batch`
    random input sequences (t = 0 gives 1, the identity).
    """
    w = orthogonal_recurrent_weight(hidden_size, gain, seed)
    g = torch.Generator().manual_seed(seed + 1)
    x_proj = input_scale * torch.randn(batch, steps, hidden_size, generator=g, dtype=torch.float64)
    norms = torch.linalg.matrix_norm(hidden_jacobians(w, x_proj, nonlinearity), ord=2)  # (T, B)
    return torch.cat([torch.ones(1, dtype=torch.float64), geometric_mean(norms)])


def gradient_reach(kind="lstm", forget_bias=None, steps=100, input_size=32, hidden_size=64,
                   batch=16, seed=0, dtype=torch.float64, direct_only=False):
    """How much gradient reaches k steps back, at initialisation, for k = 0..steps.

    A fresh course_lib cell (torch's initialisation; for the LSTM, forget-gate
    bias `forget_bias` if given) reads `steps` random inputs. Its memory s is
    the cell state c for the LSTM, the hidden state h for the RNN and the GRU.
    With L = u . s_T for a random unit vector u, we backpropagate once and
    measure ||dL/ds_{T-k}|| (1 at k = 0).

    Returns a dict: "reach" (steps + 1,) the geometric mean over the batch,
    and for the LSTM "forget_product" (steps + 1,), ||u * f_T * f_{T-1} * ... * f_{T-k+1}||,
    the gradient along the additive path c_t = f_t * c_{t-1} + ... alone (same mean),
    and "forget_mean", the mean forget gate.

    The cell runs in float64 by default: in float32 the norm of a gradient whose entries are
    all below about 1e-22 reads 0 although the gradient is not 0 (their squares fall below
    float32's smallest number, about 1e-45), and one such row makes the geometric mean 0.
    direct_only=True (LSTM) cuts every path but the additive one: h_{t-1} enters the next
    step's gates detached, so the measured reach is then exactly the forget-gate product.
    """
    cells = {"rnn": rnn.RNNCell, "lstm": rnn.LSTMCell, "gru": rnn.GRUCell}
    if kind not in cells:
        raise ValueError(f"kind must be one of {sorted(cells)}, got {kind!r}")
    if direct_only and kind != "lstm":
        raise ValueError(f"direct_only is for kind='lstm', got kind={kind!r}")
    torch.manual_seed(seed)
    cell = cells[kind](input_size, hidden_size)
    if forget_bias is not None:
        rnn.set_forget_bias(cell, forget_bias)
    cell = cell.to(dtype)
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(steps, batch, input_size, generator=g).to(dtype)  # (T, B, input_size)
    u = torch.nn.functional.normalize(torch.randn(hidden_size, generator=g), dim=0).to(dtype)  # (H,)
    h = torch.zeros(batch, hidden_size, dtype=dtype, requires_grad=kind != "lstm")  # h_0
    c = torch.zeros(batch, hidden_size, dtype=dtype, requires_grad=True)  # c_0 (LSTM)
    memories, log_forget = [c if kind == "lstm" else h], []  # s_0..s_T, and log f_t (LSTM)
    for t in range(steps):  # the cell itself, plus the forget gate read off its parameters
        if kind == "lstm":
            gates = torch.nn.functional.linear(x[t], cell.weight_ih, cell.bias_ih) \
                + torch.nn.functional.linear(h, cell.weight_hh, cell.bias_hh)  # (B, 4H)
            log_forget.append(torch.nn.functional.logsigmoid(gates.chunk(4, -1)[1]).detach())
            h, c = cell(x[t], (h.detach() if direct_only else h, c))
            c.retain_grad()
            memories.append(c)
        else:
            h = cell(x[t], h)
            h.retain_grad()
            memories.append(h)
    (memories[-1] @ u).sum().backward()  # L = u . s_T; each batch row only reaches its own states
    norms = torch.stack([s.grad.norm(dim=-1) for s in reversed(memories)])  # (T + 1, B): k = 0..T
    out = {"reach": geometric_mean(norms, dim=1)}  # (T + 1,)
    if kind == "lstm":
        logf = torch.stack(log_forget[::-1])  # (T, B, H): log f_T, log f_{T-1}, ...
        prod = torch.cat([logf.new_zeros(1, batch, hidden_size), logf.cumsum(0)]).exp()  # (T+1, B, H)
        out["forget_product"] = geometric_mean((u * prod).norm(dim=-1), dim=1)  # ||u * f_T * ... ||
        out["forget_mean"] = float(logf.exp().mean())
    return out
