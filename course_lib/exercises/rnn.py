"""Checks for chapter 1, "Sequences and recurrent networks"."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._compare import within
from ._engine import Answer, Case, Check, Mistake, Prediction, load, randn


def _params(g, input_size, H, gates=1, scale=0.5):
    """(W_ih, W_hh, b_ih, b_hh) of a layer with `gates` stacked gates."""
    return (randn(g, gates * H, input_size, scale=scale), randn(g, gates * H, H, scale=scale),
            randn(g, gates * H, scale=scale), randn(g, gates * H, scale=scale))


def _layer(kind, W_ih, W_hh, b_ih, b_hh):
    """A course_lib layer (batch_first) holding these weights."""
    layer = load(f"rnn.{kind}")(W_ih.shape[1], W_hh.shape[1]).to(W_ih.dtype)
    layer.load_state_dict({"weight_ih_l0": W_ih, "weight_hh_l0": W_hh,
                           "bias_ih_l0": b_ih, "bias_hh_l0": b_hh})
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


def _rnn_forward_cases(g):
    cases = []
    for description, B, T, input_size, H, zero_h0 in [
            ("B=2, T=5, 3 inputs, 4 units", 2, 5, 3, 4, False), ("h0 = zeros", 3, 4, 2, 5, True),
            ("a single time step", 2, 1, 3, 4, False),
            ("a long sequence, one example", 1, 12, 4, 3, False)]:
        x = randn(g, B, T, input_size)
        h0 = torch.zeros(B, H) if zero_h0 else randn(g, B, H, scale=0.5)
        cases.append(Case(description, x, h0, *_params(g, input_size, H)))
    return cases


check_rnn_forward = Check(
    "check_rnn_forward", "fn(x (B, T, I), h0 (B, H), W_ih, W_hh, b_ih, b_hh) -> "
    "(outputs (B, T, H), h_T (B, H)): a tanh RNN unrolled over time",
    params=("x", "h0", "W_ih", "W_hh", "b_ih", "b_hh"),
    reference=_rnn_forward, cases=_rnn_forward_cases, seed=10, outputs=("outputs", "h_T"),
    mistakes=[
        Mistake("every step used h0: feed the new state back in (h = ... inside the loop, and "
                "use that h at the next step).", lambda *a: _loop(*a, feedback=False)),
        Mistake("the outputs are shifted by one step: store h AFTER updating it (h_1..h_T, not "
                "h_0..h_{T-1}).", lambda *a: _loop(*a, store_before=True)),
        Mistake("outputs are (T, B, H): stack the states along dim=1 to get (B, T, H) (batch "
                "first).", lambda *a: (_loop(*a)[0].transpose(0, 1), _loop(*a)[1])),
        Mistake("return a pair: (the outputs of every step (B, T, H), the final state (B, H)).",
                lambda *a: _loop(*a)[0]),
        Mistake("the outputs are right but the final state is not: return the last h, h_T.",
                lambda x, h0, *w: (_loop(x, h0, *w)[0], h0)),
    ],
    hints=["Loop over the time steps t = 0 .. T-1 with a running state h, starting from h0.",
           "At each step the new state mixes the input x[:, t] and the previous state through "
           "their weight matrices and biases, then tanh; write x_t @ W_ih.T for row vectors.",
           "Collect the new states in a list and stack them along dim=1; return them with the "
           "last state."],
)


# --------------------------------------------------------------------------------------
# the BPTT Jacobian dh_T/dh_0
# --------------------------------------------------------------------------------------
def _jacobian(W_hh, hs, order="right"):
    """dh_T/dh_0 = D_T W ... D_1 W with D_t = diag(1 - h_t^2); `order` names the mistakes."""
    J = torch.eye(W_hh.shape[0], dtype=W_hh.dtype)
    for h in hs:
        D = torch.diag(1 - h**2)
        J = {"right": lambda D, J: D @ W_hh @ J, "reversed": lambda D, J: J @ D @ W_hh,
             "W first": lambda D, J: W_hh @ D @ J, "no tanh'": lambda D, J: W_hh @ J}[order](D, J)
    return J


def _jacobian_cases(g):
    cases = []
    for description, T, H in [("T=4, 3 units", 4, 3), ("a single step", 1, 4),
                              ("T=10, 5 units", 10, 5)]:
        W_ih, W_hh, b_ih, b_hh = _params(g, 2, H, scale=0.8)
        x = randn(g, 1, T, 2)
        hs = _loop(x, randn(g, 1, H, scale=0.5), W_ih, W_hh, b_ih, b_hh)[0][0]  # (T, H)
        cases.append(Case(description, W_hh, hs))
    return cases


check_bptt_jacobian = Check(
    "check_bptt_jacobian", "fn(W_hh (H, H), hs (T, H) = h_1..h_T) -> dh_T/dh_0 (H, H) of a tanh RNN",
    params=("W_hh", "hs"),
    reference=_jacobian, cases=_jacobian_cases, seed=11,
    mistakes=[
        Mistake("the result is transposed: row i of dh_T/dh_0 is the gradient of h_T[i].",
                lambda W, hs: _jacobian(W, hs).T),
        Mistake("the factors are multiplied in the wrong order: the newest step goes on the "
                "left, J = D_t W_hh J.", lambda W, hs: _jacobian(W, hs, "reversed")),
        Mistake("diag(tanh') must multiply on the LEFT of W_hh: h_t = tanh(a_t) with a_t = "
                "W_hh h_{t-1} + ..., so dh_t/dh_{t-1} = diag(1 - h_t**2) W_hh.",
                lambda W, hs: _jacobian(W, hs, "W first")),
        Mistake("the tanh derivative is missing: each step contributes diag(1 - h_t**2) too.",
                lambda W, hs: _jacobian(W, hs, "no tanh'")),
    ],
    hints=["By the chain rule dh_T/dh_0 is a product of T one-step Jacobians dh_t/dh_{t-1}.",
           "One step: h_t = tanh(a_t) with a_t = W_hh h_{t-1} + ...; differentiate the tanh "
           "(written with h_t itself) and the linear map, and mind which factor comes first.",
           "Start from the identity and multiply one step's Jacobian in per t; the newest step "
           "ends up on the left."],
)


# --------------------------------------------------------------------------------------
# gradient clipping
# --------------------------------------------------------------------------------------
def _clip(grads, max_norm):
    total = torch.sqrt(sum((g.double() ** 2).sum() for g in grads))
    scale = min(1.0, max_norm / float(total)) if total > 0 else 1.0
    return tuple(g * scale for g in grads)


check_clip_grad_norm = Check(
    "check_clip_grad_norm", "fn(grads (tensors), max_norm) -> the tensors rescaled so that their "
    "global L2 norm is at most max_norm",
    params=("grads", "max_norm"),
    reference=_clip, seed=12,
    cases=lambda g: [
        Case("three tensors, global norm above max_norm",
             (randn(g, 4, 3, scale=3.0), randn(g, 5, scale=3.0), randn(g, 2, 2, scale=3.0)), 1.0),
        Case("norm below max_norm: unchanged", (randn(g, 3, scale=0.1), randn(g, 2, 2, scale=0.1)), 5.0),
        Case("an exploding gradient", (randn(g, 6, 6, scale=1e4), randn(g, 6, scale=1e3)), 0.5),
        Case("one tensor", (randn(g, 10, scale=2.0),), 1.0),
    ],
    mistakes=[
        Mistake("each tensor was clipped on its own: clip by the GLOBAL norm of all of them "
                "together, so the direction of the whole gradient is kept.",
                lambda grads, m: tuple(_clip((g,), m)[0] for g in grads)),
        Mistake("the values were clamped one by one: rescale the whole gradient instead (that "
                "keeps its direction).", lambda grads, m: tuple(g.clamp(-m, m) for g in grads)),
        Mistake("a small gradient was scaled UP to max_norm: clipping only ever shrinks "
                "(scale = min(1, max_norm / norm)).",
                lambda grads, m: tuple(g * m / torch.sqrt(sum((x**2).sum() for x in grads))
                                       for g in grads)),
    ],
    hints=["Compute ONE norm for all the tensors together: the square root of the sum of every "
           "squared entry.",
           "Rescale every tensor by the same factor, and only when that norm exceeds max_norm."],
)


# --------------------------------------------------------------------------------------
# cosine similarity
# --------------------------------------------------------------------------------------
def _unit_rows(a, dim=-1):
    return a / a.norm(dim=dim, keepdim=True)


check_cosine_similarity = Check(
    "check_cosine_similarity", "fn(a (N, d), b (M, d)) -> (N, M): cos(a_i, b_j) for every pair of rows",
    params=("a", "b"),
    reference=lambda a, b: F.cosine_similarity(a[:, None], b[None], dim=-1), seed=13,
    cases=lambda g: [
        Case("random vectors, N != M", randn(g, 3, 5), randn(g, 4, 5)),
        Case("one-hot vectors", torch.eye(4), torch.eye(4)),
        Case("rows of very different lengths",
             randn(g, 2, 3) * torch.tensor([[100.0], [0.01]]), randn(g, 3, 3)),
    ],
    mistakes=[
        Mistake("these are dot products: divide by the lengths ||a_i|| ||b_j||.",
                lambda a, b: a @ b.T),
        Mistake("the result is (M, N): rows index a, columns index b.",
                lambda a, b: _unit_rows(b) @ _unit_rows(a).T),
        Mistake("the norms were taken over dim=0 (columns): normalise each ROW (dim=-1).",
                lambda a, b: _unit_rows(a, 0) @ _unit_rows(b, 0).T),
    ],
    hints=["cos(u, v) is the dot product of u and v divided by both lengths.",
           "Normalise every row of a and of b to length 1 first (norm over the last dim, "
           "keepdim=True); then one matrix product gives every pair."],
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


def _bptt_by_hand(x, h0, W_ih, W_hh, b_ih, b_hh, w_out, b_out, y, steps_back=None, tanh_grad=True,
                  pair_with="previous", scale=2.0):
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
    for description, B, T, d, H in [("B=3, T=4, 2 inputs, 3 units", 3, 4, 2, 3),
                                    ("a single step", 2, 1, 3, 4),
                                    ("B=1, T=7, 3 inputs, 5 units", 1, 7, 3, 5)]:
        cases.append(Case(description, randn(g, B, T, d), randn(g, B, H, scale=0.5),
                          *_params(g, d, H, scale=0.6), randn(g, H), randn(g, 1)[0], randn(g, B)))
    return cases


check_bptt_weight_grad = Check(
    "check_bptt_weight_grad", "fn(x (B, T, I), h0 (B, H), W_ih, W_hh, b_ih, b_hh, w_out (H,), "
    "b_out, y (B,)) -> dL/dW_hh (H, H) for the tanh RNN read out from h_T, "
    "L = mean((h_T . w_out + b_out - y)^2), by hand (no autograd)",
    params=("x", "h0", "W_ih", "W_hh", "b_ih", "b_hh", "w_out", "b_out", "y"),
    reference=_bptt_grad, cases=_bptt_cases, seed=14,
    mistakes=[
        Mistake("the result is transposed: entry (i, j) is dL/dW_hh[i, j], and W_hh[i, j] "
                "carries h_{t-1}[j] into unit i.", lambda *a: _bptt_by_hand(*a).T),
        Mistake("only the last step's term: W_hh is used at EVERY step, so dL/dW_hh is a sum "
                "of T terms, one per step (this is truncation after one step).",
                lambda *a: _bptt_by_hand(*a, steps_back=1)),
        Mistake("tanh' is missing: on its way back, each step multiplies the gradient by "
                "1 - h_t**2.", lambda *a: _bptt_by_hand(*a, tanh_grad=False)),
        Mistake("step t's term pairs the error with h_t; W_hh multiplies h_{t-1} at step t, so "
                "pair it with h_{t-1}.", lambda *a: _bptt_by_hand(*a, pair_with="current")),
        Mistake("off by a factor of 2: the derivative of the squared error (e)^2 is 2e.",
                lambda *a: _bptt_by_hand(*a, scale=1.0)),
    ],
    hints=["Run the forward pass and keep every state h_0 .. h_T. The loss depends on W_hh "
           "through each of the T steps: the gradient is a sum of one term per step.",
           "Go backwards from t = T, carrying the gradient with respect to h_t. At step t, "
           "pass it through tanh' (written with h_t) to get the gradient of the pre-activation "
           "a_t; the term of step t is an outer product of that with the state W_hh multiplied.",
           "Before moving to step t - 1, carry the gradient of a_t back to h_{t-1} through "
           "W_hh. Mind the batch: the mean over B puts 2 (y_hat - y) / B on each example."],
)


# --------------------------------------------------------------------------------------
# the adding problem of 1997: its one-value baseline
# --------------------------------------------------------------------------------------
check_adding_1997_baseline = Answer(
    "check_adding_1997_baseline", "the MSE of a model that remembers one of the two marked values "
    "exactly (and predicts the best constant for the other) on Hochreiter & Schmidhuber's 1997 "
    "adding problem: values in U[-1, 1], target 0.5 + (X1 + X2) / 4",
    quantity="the one-value baseline of the 1997 adding problem (an MSE)",
    reference=lambda: 1 / 48, tolerance=within(rel=0.02),
    mistakes=[
        Mistake("1/12 is the one-value baseline of this page's variant (values in U[0, 1], "
                "target X1 + X2); the 1997 target is scaled by 1/4 and the values spread wider.",
                lambda: 1 / 12),
        Mistake("that is the MSE of remembering nothing (the variance of the whole target); "
                "remembering one value removes that value's share.", lambda: 1 / 24),
        Mistake("Var(U[-1, 1]) is (1 - (-1))^2 / 12 = 1/3, not 1/12.", lambda: 1 / 192),
        Mistake("the target's scale of 1/4 is missing: X2 / 4 has 1/16 of the variance of X2.",
                lambda: 1 / 3),
    ],
    hints=["The best prediction of a value you do not know is its mean, and the MSE it costs is "
           "its variance.",
           "If X1 is remembered exactly, the error left is the part of the target that X2 "
           "contributes. Var(a X) = a^2 Var(X), and Var(U[lo, hi]) = (hi - lo)^2 / 12."],
)


# --------------------------------------------------------------------------------------
# predict, then measure: the gain at which the tanh RNN's Jacobian stops vanishing
# --------------------------------------------------------------------------------------
def critical_gain(nonlinearity="tanh", t=100, lo=1.0, hi=2.5, tol=1e-3):
    """The smallest gain of W_hh (a scaled random orthogonal matrix) at which the measured
    ||dh_t/dh_0|| (course_lib.widgets.jacobian_norms) reaches 1, by bisection."""
    from course_lib.widgets import jacobian_norms

    while hi - lo > tol:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if float(jacobian_norms(mid, nonlinearity)[t]) >= 1 else (mid, hi)
    return hi


check_critical_gain_prediction = Prediction(
    "check_critical_gain_prediction", "your prediction of the smallest gain of W_hh at which the "
    "tanh RNN's ||dh_100/dh_0|| reaches 1, against the measurement",
    quantity="the gain at which the tanh RNN's Jacobian norm after 100 steps reaches 1",
    tolerance=within(abs=0.15), example=1.53,
    explanation=("with tanh every step also multiplies by diag(1 - h_t^2), which is below 1, "
                 "and the larger the gain, the larger the pre-activations and the flatter tanh "
                 "gets. So the gain has to exceed 1 by a wide margin before the product stops "
                 "shrinking; then it grows quickly (the explorer above shows how fast)."),
    mistakes=[
        Mistake("1 is the answer of the linear network with an orthogonal W_hh (its Jacobian "
                "is exactly gain^t); tanh's derivative shrinks every step further.", lambda m: 1.0),
        Mistake("saturation does not hold the product down for ever: past a moderate gain it "
                "grows exponentially, so the crossing comes well before a gain of 3.",
                lambda m: 3.0),
    ],
    hints=["Start from the linear network, whose answer you know, then ask in which direction "
           "each factor 1 - h_t^2 pushes it.",
           "The tanh panel of the first figure stays below 1 at t = 100 for every gain it plots, "
           "even the largest: the critical gain is larger. The explorer reaches larger gains."],
)
