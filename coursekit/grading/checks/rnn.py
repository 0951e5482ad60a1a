"""References of the checks of chapter 1, "Sequences and recurrent networks"."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from course_lib.exercises._variant import variant_params

from ..references import AnswerReference, Case, Reference, load, randn, register


def _params(g, input_size, H, gates=1, scale=0.5):
    """(W_ih, W_hh, b_ih, b_hh) of a layer with `gates` stacked gates."""
    return (
        randn(g, gates * H, input_size, scale=scale),
        randn(g, gates * H, H, scale=scale),
        randn(g, gates * H, scale=scale),
        randn(g, gates * H, scale=scale),
    )


def _layer(kind, W_ih, W_hh, b_ih, b_hh):
    """A course_lib layer (batch_first) holding these weights."""
    layer = load(f"rnn.{kind}")(W_ih.shape[1], W_hh.shape[1]).to(W_ih.dtype)
    layer.load_state_dict(
        {"weight_ih_l0": W_ih, "weight_hh_l0": W_hh, "bias_ih_l0": b_ih, "bias_hh_l0": b_hh}
    )
    return layer


# --------------------------------------------------------------------------------------
# unrolling the vanilla RNN
# --------------------------------------------------------------------------------------
def _rnn_forward(x, h0, W_ih, W_hh, b_ih, b_hh):
    with torch.no_grad():
        out, h_n = _layer("RNN", W_ih, W_hh, b_ih, b_hh)(x, h0[None])
    return out, h_n[0]


def _loop(x, h0, W_ih, W_hh, b_ih, b_hh, feedback=True, store_before=False):
    """The unrolled RNN, with two typical mistakes as switches."""
    h, outs = h0, []
    for t in range(x.shape[1]):
        new = torch.tanh(x[:, t] @ W_ih.T + b_ih + (h if feedback else h0) @ W_hh.T + b_hh)
        outs.append(h if store_before else new)
        h = new
    return torch.stack(outs, 1), h


def _torch_rnn_forward(x, h0, W_ih, W_hh, b_ih, b_hh):
    rnn = torch.nn.RNN(W_ih.shape[1], W_hh.shape[1], batch_first=True)
    rnn.load_state_dict({"weight_ih_l0": W_ih, "weight_hh_l0": W_hh, "bias_ih_l0": b_ih, "bias_hh_l0": b_hh})
    with torch.no_grad():
        out, h_n = rnn(x, h0[None])
    return out, h_n[0]


def _rnn_forward_cases(g):
    cases = []
    for description, B, T, input_size, H, zero_h0 in [
        ("B=2, T=5, 3 inputs, 4 units", 2, 5, 3, 4, False),
        ("h0 = zeros", 3, 4, 2, 5, True),
        ("a single time step", 2, 1, 3, 4, False),
        ("a long sequence, one example", 1, 12, 4, 3, False),
    ]:
        x = randn(g, B, T, input_size)
        h0 = torch.zeros(B, H) if zero_h0 else randn(g, B, H, scale=0.5)
        cases.append(Case(description, x, h0, *_params(g, input_size, H)))
    return cases


register(
    "check_rnn_forward",
    Reference(
        seed=10,
        cases=_rnn_forward_cases,
        solution=_rnn_forward,
        written=_loop,
        mistakes=[
            lambda *a: _loop(*a, feedback=False),
            lambda *a: _loop(*a, store_before=True),
            lambda *a: (_loop(*a)[0].transpose(0, 1), _loop(*a)[1]),
            lambda *a: _loop(*a)[0],
            lambda x, h0, *w: (_loop(x, h0, *w)[0], h0),
        ],
        shortcuts=[_rnn_forward, _torch_rnn_forward],
    ),
)


# --------------------------------------------------------------------------------------
# the BPTT Jacobian dh_T/dh_0
# --------------------------------------------------------------------------------------
def _jacobian(W_hh, hs, order="right"):
    """dh_T/dh_0 = D_T W ... D_1 W with D_t = diag(1 - h_t^2); `order` names the mistakes."""
    J = torch.eye(W_hh.shape[0], dtype=W_hh.dtype)
    for h in hs:
        D = torch.diag(1 - h**2)
        J = {
            "right": lambda D, J: D @ W_hh @ J,
            "reversed": lambda D, J: J @ D @ W_hh,
            "W first": lambda D, J: W_hh @ D @ J,
            "no tanh'": lambda D, J: W_hh @ J,
        }[order](D, J)
    return J


def _jacobian_by_autograd(W_hh, hs):
    """The product of one-step Jacobians, tanh' by autograd: h_t = tanh(a_t), a_t = atanh(h_t)."""
    J = torch.eye(W_hh.shape[0], dtype=W_hh.dtype)
    for h in hs:
        J = torch.autograd.functional.jacobian(torch.tanh, torch.atanh(h)) @ W_hh @ J
    return J


def _jacobian_cases(g):
    cases = []
    for description, T, H in [("T=4, 3 units", 4, 3), ("a single step", 1, 4), ("T=10, 5 units", 10, 5)]:
        W_ih, W_hh, b_ih, b_hh = _params(g, 2, H, scale=0.8)
        x = randn(g, 1, T, 2)
        hs = _loop(x, randn(g, 1, H, scale=0.5), W_ih, W_hh, b_ih, b_hh)[0][0]  # (T, H)
        cases.append(Case(description, W_hh, hs))
    return cases


register(
    "check_bptt_jacobian",
    Reference(
        seed=11,
        cases=_jacobian_cases,
        solution=_jacobian,
        mistakes=[
            lambda W, hs: _jacobian(W, hs).T,
            lambda W, hs: _jacobian(W, hs, "reversed"),
            lambda W, hs: _jacobian(W, hs, "W first"),
            lambda W, hs: _jacobian(W, hs, "no tanh'"),
        ],
        shortcuts=[_jacobian_by_autograd],
    ),
)


# --------------------------------------------------------------------------------------
# gradient clipping
# --------------------------------------------------------------------------------------
def _clip(grads, max_norm):
    total = torch.sqrt(sum((g.double() ** 2).sum() for g in grads))
    scale = min(1.0, max_norm / float(total)) if total > 0 else 1.0
    return tuple(g * scale for g in grads)


def _clip_by_torch(grads, max_norm):
    params = [torch.nn.Parameter(torch.zeros_like(g)) for g in grads]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    torch.nn.utils.clip_grad_norm_(params, max_norm)
    return tuple(p.grad for p in params)


register(
    "check_clip_grad_norm",
    Reference(
        seed=12,
        cases=lambda g: [
            Case(
                "three tensors, global norm above max_norm",
                (randn(g, 4, 3, scale=3.0), randn(g, 5, scale=3.0), randn(g, 2, 2, scale=3.0)),
                1.0,
            ),
            Case("norm below max_norm: unchanged", (randn(g, 3, scale=0.1), randn(g, 2, 2, scale=0.1)), 5.0),
            Case("an exploding gradient", (randn(g, 6, 6, scale=1e4), randn(g, 6, scale=1e3)), 0.5),
            Case("one tensor", (randn(g, 10, scale=2.0),), 1.0),
        ],
        solution=_clip,
        mistakes=[
            lambda grads, m: tuple(_clip((g,), m)[0] for g in grads),
            lambda grads, m: tuple(g.clamp(-m, m) for g in grads),
            lambda grads, m: tuple(g * m / torch.sqrt(sum((x**2).sum() for x in grads)) for g in grads),
        ],
        shortcuts=[_clip_by_torch],
    ),
)


# --------------------------------------------------------------------------------------
# cosine similarity
# --------------------------------------------------------------------------------------
def _unit_rows(a, dim=-1):
    return a / a.norm(dim=dim, keepdim=True)


register(
    "check_cosine_similarity",
    Reference(
        seed=13,
        cases=lambda g: [
            Case("random vectors, N != M", randn(g, 3, 5), randn(g, 4, 5)),
            Case("one-hot vectors", torch.eye(4), torch.eye(4)),
            Case(
                "rows of very different lengths",
                randn(g, 2, 3) * torch.tensor([[100.0], [0.01]]),
                randn(g, 3, 3),
            ),
        ],
        solution=lambda a, b: F.cosine_similarity(a[:, None], b[None], dim=-1),
        written=lambda a, b: _unit_rows(a) @ _unit_rows(b).T,
        mistakes=[
            lambda a, b: a @ b.T,
            lambda a, b: _unit_rows(b) @ _unit_rows(a).T,
            lambda a, b: _unit_rows(a, 0) @ _unit_rows(b, 0).T,
        ],
        shortcuts=[lambda a, b: F.cosine_similarity(a[:, None], b[None], dim=-1)],
    ),
)


# --------------------------------------------------------------------------------------
# backpropagation through time by hand: dL/dW_hh as a sum over the steps
# --------------------------------------------------------------------------------------
def _bptt_loss(x, h0, W_ih, W_hh, b_ih, b_hh, w_out, b_out, y):
    h = h0
    for t in range(x.shape[1]):
        h = torch.tanh(x[:, t] @ W_ih.T + b_ih + h @ W_hh.T + b_hh)
    return ((h @ w_out + b_out - y) ** 2).mean()


def _bptt_grad(x, h0, W_ih, W_hh, b_ih, b_hh, w_out, b_out, y):
    """dL/dW_hh by autograd (the reference)."""
    W_hh = W_hh.clone().requires_grad_()
    return torch.autograd.grad(_bptt_loss(x, h0, W_ih, W_hh, b_ih, b_hh, w_out, b_out, y), W_hh)[0]


def _bptt_by_backward(x, h0, W_ih, W_hh, b_ih, b_hh, w_out, b_out, y):
    """dL/dW_hh by backward(), inside torch.enable_grad() (as if the check ran under no_grad)."""
    with torch.enable_grad():
        W_hh = W_hh.clone().requires_grad_()
        _bptt_loss(x, h0, W_ih, W_hh, b_ih, b_hh, w_out, b_out, y).backward()
    return W_hh.grad


def _bptt_by_hand(
    x,
    h0,
    W_ih,
    W_hh,
    b_ih,
    b_hh,
    w_out,
    b_out,
    y,
    steps_back=None,
    tanh_grad=True,
    pair_with="previous",
    scale=2.0,
):
    """Hand-written BPTT with the typical mistakes as switches."""
    hs = [h0]
    for t in range(x.shape[1]):
        hs.append(torch.tanh(x[:, t] @ W_ih.T + b_ih + hs[-1] @ W_hh.T + b_hh))
    T, B = x.shape[1], x.shape[0]
    d_h = (scale / B) * (hs[-1] @ w_out + b_out - y)[:, None] * w_out  # dL/dh_T: (B, H)
    grad = torch.zeros_like(W_hh)
    stop = 0 if steps_back is None else max(T - steps_back, 0)
    for t in range(T, stop, -1):
        delta = d_h * (1 - hs[t] ** 2) if tanh_grad else d_h  # dL/da_t: (B, H)
        grad += delta.T @ (hs[t - 1] if pair_with == "previous" else hs[t])
        d_h = delta @ W_hh  # dL/dh_{t-1}
    return grad


def _bptt_cases(g):
    cases = []
    for description, B, T, d, H in [
        ("B=3, T=4, 2 inputs, 3 units", 3, 4, 2, 3),
        ("a single step", 2, 1, 3, 4),
        ("B=1, T=7, 3 inputs, 5 units", 1, 7, 3, 5),
    ]:
        cases.append(
            Case(
                description,
                randn(g, B, T, d),
                randn(g, B, H, scale=0.5),
                *_params(g, d, H, scale=0.6),
                randn(g, H),
                randn(g, 1)[0],
                randn(g, B),
            )
        )
    return cases


register(
    "check_bptt_weight_grad",
    Reference(
        seed=14,
        cases=_bptt_cases,
        solution=_bptt_grad,
        written=_bptt_by_hand,
        mistakes=[
            lambda *a: _bptt_by_hand(*a).T,
            lambda *a: _bptt_by_hand(*a, steps_back=1),
            lambda *a: _bptt_by_hand(*a, tanh_grad=False),
            lambda *a: _bptt_by_hand(*a, pair_with="current"),
            lambda *a: _bptt_by_hand(*a, scale=1.0),
        ],
        shortcuts=[_bptt_grad, _bptt_by_backward],
    ),
)


# --------------------------------------------------------------------------------------
# the adding problem of 1997: its one-value baseline
# --------------------------------------------------------------------------------------
def adding_baseline(mistake=None):
    """The MSE of remembering X_1 exactly on the statement's adding problem (variant_params:
    X ~ U[lo, hi], target offset + (X_1 + X_2) / divisor): Var(X_2 / divisor) =
    (hi - lo)^2 / (12 divisor^2); 1/48 for the 1997 setting (U[-1, 1], divisor 4). Mistakes:
    "page" (this page's 1/12), "nothing" (remembering nothing: both values' share), "variance
    1/12" (Var(U[0, 1]) for the values' variance), "no scale" (the divisor left out)."""
    lo, hi, _, divisor = variant_params("ex-adding-1997")
    variance = (hi - lo) ** 2 / 12  # Var(X_2)
    if mistake == "page":
        return 1 / 12
    if mistake == "nothing":
        return 2 * variance / divisor**2
    if mistake == "variance 1/12":
        return 1 / 12 / divisor**2
    if mistake == "no scale":
        return variance
    return variance / divisor**2


register(
    "check_adding_1997_baseline",
    AnswerReference(
        value=adding_baseline,
        mistakes=[
            lambda: adding_baseline("page"),
            lambda: adding_baseline("nothing"),
            lambda: adding_baseline("variance 1/12"),
            lambda: adding_baseline("no scale"),
        ],
    ),
)


# --------------------------------------------------------------------------------------
# predict, then measure: the gain at which the tanh RNN's Jacobian stops vanishing
# --------------------------------------------------------------------------------------
