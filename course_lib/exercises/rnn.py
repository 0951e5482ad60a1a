"""Checks for the chapters "Sequences and recurrent networks" and "LSTM and GRU"."""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch

from ._engine import (Case, CheckResult, ExerciseFailure, _call_learner, _compare, _randn,
                      _run_cases, _same)


def _rnn():
    from course_lib import rnn  # imported lazily: the checks only need it when run

    return rnn


def _rnn_layer(W_ih, W_hh, b_ih, b_hh, kind="rnn"):
    """A course_lib layer (batch_first) holding these weights."""
    rnn = _rnn()
    layer = {"rnn": rnn.RNN, "lstm": rnn.LSTM, "gru": rnn.GRU}[kind](
        W_ih.shape[1], W_hh.shape[1], dtype=W_ih.dtype)
    layer.load_state_dict({"weight_ih_l0": W_ih, "weight_hh_l0": W_hh,
                           "bias_ih_l0": b_ih, "bias_hh_l0": b_hh})
    return layer


def _rnn_params(g, input_size, H, gates=1, scale=0.5):
    return (_randn(g, gates * H, input_size, scale=scale), _randn(g, gates * H, H, scale=scale),
            _randn(g, gates * H, scale=scale), _randn(g, gates * H, scale=scale))


# --------------------------------------------------------------------------------------
# Chapter 1: unrolling the vanilla RNN
# --------------------------------------------------------------------------------------
_FORWARD_HINT = ("loop over t = 0..T-1: h = tanh(x[:, t] @ W_ih.T + b_ih + h @ W_hh.T + b_hh), "
                 "starting from h = h0; collect every new h and stack them along dim=1. "
                 "Return (outputs (B, T, H), the last h (B, H)).")

_FORWARD_NAMES = ("x", "h0", "W_ih", "W_hh", "b_ih", "b_hh")


def _rnn_forward_reference(x, h0, W_ih, W_hh, b_ih, b_hh):
    with torch.no_grad():
        out, h_n = _rnn_layer(W_ih, W_hh, b_ih, b_hh)(x, h0[None])
    return out, h_n[0]


def check_rnn_forward(fn: Callable) -> CheckResult:
    """Check ``fn(x, h0, W_ih, W_hh, b_ih, b_hh) -> (outputs (B, T, H), h_T (B, H))``."""
    g = torch.Generator().manual_seed(10)
    cases = []
    for description, B, T, input_size, H, zero_h0 in [
        ("B=2, T=5, 3 inputs, 4 units", 2, 5, 3, 4, False),
        ("h0 = zeros", 3, 4, 2, 5, True),
        ("a single time step", 2, 1, 3, 4, False),
        ("a long sequence, one example", 1, 12, 4, 3, False),
    ]:
        x = _randn(g, B, T, input_size)
        h0 = torch.zeros(B, H) if zero_h0 else _randn(g, B, H, scale=0.5)
        cases.append(Case(description, (x, h0, *_rnn_params(g, input_size, H)),
                          names=_FORWARD_NAMES))
    return _run_cases("check_rnn_forward", fn, _rnn_forward_reference, cases, _FORWARD_HINT,
                      diagnose=_diagnose_rnn_forward)


def _diagnose_rnn_forward(case: Case, got: Any, expected: Any) -> Optional[str]:
    x, h0, W_ih, W_hh, b_ih, b_hh = case.args
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return "return a pair: (outputs of every step (B, T, H), the final state (B, H))."
    outputs, h_T = got
    exp_out, exp_h = expected
    if not isinstance(outputs, torch.Tensor) or not isinstance(h_T, torch.Tensor):
        return None
    if outputs.shape == (x.shape[1], x.shape[0], h0.shape[1]) != exp_out.shape:
        return "outputs are (T, B, H): stack the states along dim=1 to get (B, T, H) (batch first)."
    no_recurrence = torch.tanh(x @ W_ih.T + b_ih + (h0 @ W_hh.T + b_hh)[:, None])
    if outputs.shape == exp_out.shape and _same(outputs, no_recurrence):
        return ("every step used h0: feed the new state back in (h = ... inside the loop, and "
                "use that h at the next step).")
    if outputs.shape == exp_out.shape and x.shape[1] > 1 and _same(outputs[:, 1:], exp_out[:, :-1]):
        return "the outputs are shifted by one step: store h AFTER updating it (h_1..h_T, not h_0..h_{T-1})."
    if outputs.shape == exp_out.shape and _same(outputs, exp_out) and h_T.shape == exp_h.shape:
        return "the outputs are right but the final state is not: return the last h, h_T."
    return None


# --------------------------------------------------------------------------------------
# Chapter 1: the BPTT Jacobian dh_T/dh_0
# --------------------------------------------------------------------------------------
_JACOBIAN_HINT = ("one factor per step, newest on the LEFT: J = I, then for t = 1..T, "
                  "J = diag(1 - h_t**2) @ W_hh @ J (the tanh' at step t is 1 - h_t**2).")


def _bptt_reference(W_hh, hs):
    J = torch.eye(W_hh.shape[0], dtype=W_hh.dtype)
    for h in hs:  # h_1 .. h_T
        J = torch.diag(1 - h**2) @ W_hh @ J
    return J


def check_bptt_jacobian(fn: Callable) -> CheckResult:
    """Check ``fn(W_hh, hs) -> dh_T/dh_0 (H, H)`` for a tanh RNN with states hs = h_1..h_T (T, H)."""
    g = torch.Generator().manual_seed(11)
    cases = []
    for description, T, H in [("T=4, 3 units", 4, 3), ("a single step", 1, 4),
                              ("T=10, 5 units", 10, 5)]:
        W_ih, W_hh, b_ih, b_hh = _rnn_params(g, 2, H, scale=0.8)
        x = _randn(g, 1, T, 2)
        with torch.no_grad():
            hs = _rnn_layer(W_ih, W_hh, b_ih, b_hh)(x, _randn(g, 1, 1, H, scale=0.5))[0][0]  # (T, H)
        cases.append(Case(description, (W_hh, hs), names=("W_hh", "hs")))
    return _run_cases("check_bptt_jacobian", fn, _bptt_reference, cases, _JACOBIAN_HINT,
                      diagnose=_diagnose_jacobian)


def _diagnose_jacobian(case: Case, got: Any, expected: Any) -> Optional[str]:
    W_hh, hs = case.args
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        return None
    if _same(got, expected.T):
        return "the result is transposed: row i of dh_T/dh_0 is the gradient of h_T[i]."
    J = torch.eye(W_hh.shape[0], dtype=W_hh.dtype)
    for h in hs:
        J = J @ torch.diag(1 - h**2) @ W_hh
    if _same(got, J):
        return ("the factors are multiplied in the wrong order: the newest step goes on the left, "
                "J = D_t W_hh J.")
    J = torch.eye(W_hh.shape[0], dtype=W_hh.dtype)
    for h in hs:
        J = W_hh @ torch.diag(1 - h**2) @ J
    if _same(got, J):
        return ("diag(tanh') must multiply on the LEFT of W_hh: h_t = tanh(a_t), a_t = W_hh h_{t-1} + ..., "
                "so dh_t/dh_{t-1} = diag(1 - h_t**2) W_hh.")
    J = torch.eye(W_hh.shape[0], dtype=W_hh.dtype)
    for h in hs:
        J = W_hh @ J
    if _same(got, J):
        return "the tanh derivative is missing: each step contributes diag(1 - h_t**2) too."
    return None


# --------------------------------------------------------------------------------------
# Chapter 1: gradient clipping
# --------------------------------------------------------------------------------------
_CLIP_HINT = ("compute ONE norm for all tensors together, total = sqrt(sum of g.pow(2).sum()); "
              "if total > max_norm, multiply every tensor by max_norm / total, else leave them.")


def _clip_reference(grads, max_norm):
    total = torch.sqrt(sum((g.double() ** 2).sum() for g in grads))
    scale = min(1.0, max_norm / float(total)) if total > 0 else 1.0
    return tuple(g * scale for g in grads)


def check_clip_grad_norm(fn: Callable) -> CheckResult:
    """Check ``fn(grads, max_norm) -> list of clipped tensors`` (one global L2 norm)."""
    g = torch.Generator().manual_seed(12)
    names = ("grads", "max_norm")
    cases = [
        Case("three tensors, global norm above max_norm",
             ((_randn(g, 4, 3, scale=3.0), _randn(g, 5, scale=3.0), _randn(g, 2, 2, scale=3.0)), 1.0),
             names=names),
        Case("norm below max_norm: unchanged",
             ((_randn(g, 3, scale=0.1), _randn(g, 2, 2, scale=0.1)), 5.0), names=names),
        Case("an exploding gradient", ((_randn(g, 6, 6, scale=1e4), _randn(g, 6, scale=1e3)), 0.5),
             names=names),
        Case("one tensor", ((_randn(g, 10, scale=2.0),), 1.0), names=names),
    ]

    def compare(got, expected):
        return _compare(tuple(got) if isinstance(got, list) else got, expected)

    return _run_cases("check_clip_grad_norm", fn, _clip_reference, cases, _CLIP_HINT,
                      compare=compare, diagnose=_diagnose_clip)


def _diagnose_clip(case: Case, got: Any, expected: Any) -> Optional[str]:
    grads, max_norm = case.args
    if not isinstance(got, (tuple, list)) or len(got) != len(grads):
        return f"return one tensor per gradient ({len(grads)} here), in the same order."
    got = tuple(got)
    per_tensor = tuple(g * min(1.0, max_norm / float(g.norm())) for g in grads)
    if len(grads) > 1 and _same(got, per_tensor):
        return ("each tensor was clipped on its own: clip by the GLOBAL norm of all of them together, "
                "so the direction of the whole gradient is kept.")
    if _same(got, tuple(g.clamp(-max_norm, max_norm) for g in grads)):
        return "the values were clamped one by one: rescale the whole gradient instead (that keeps its direction)."
    total = torch.sqrt(sum((g.double() ** 2).sum() for g in grads))
    if total < max_norm and _same(got, tuple(g * max_norm / total for g in grads)):
        return "a small gradient was scaled UP to max_norm: clipping only ever shrinks (scale = min(1, max_norm / norm))."
    return None


# --------------------------------------------------------------------------------------
# Chapter 1: cosine similarity
# --------------------------------------------------------------------------------------
_COSINE_HINT = ("divide every row of a and of b by its L2 norm (norm over the last dim, keepdim=True), "
                "then take a @ b.T: entry (i, j) is cos(a_i, b_j).")


def check_cosine_similarity(fn: Callable) -> CheckResult:
    """Check ``fn(a (N, d), b (M, d)) -> (N, M)`` cosine similarities of every pair of rows."""
    g = torch.Generator().manual_seed(13)
    names = ("a", "b")
    eye = torch.eye(4)
    cases = [
        Case("random vectors, N != M", (_randn(g, 3, 5), _randn(g, 4, 5)), names=names),
        Case("one-hot vectors", (eye, eye), names=names),
        Case("rows of very different lengths", (_randn(g, 2, 3) * torch.tensor([[100.0], [0.01]]),
                                                _randn(g, 3, 3)), names=names),
    ]
    reference = lambda a, b: torch.nn.functional.cosine_similarity(  # noqa: E731
        a[:, None], b[None], dim=-1)
    return _run_cases("check_cosine_similarity", fn, reference, cases, _COSINE_HINT,
                      diagnose=_diagnose_cosine)


def _diagnose_cosine(case: Case, got: Any, expected: Any) -> Optional[str]:
    a, b = case.args
    if not isinstance(got, torch.Tensor):
        return None
    if got.shape == expected.shape and _same(got, a @ b.T):
        return "these are dot products: divide by the lengths ||a_i|| ||b_j||."
    if got.shape == expected.T.shape and got.shape != expected.shape:
        return "the result is (M, N): rows index a, columns index b."
    an = a / a.norm(dim=0, keepdim=True)
    bn = b / b.norm(dim=0, keepdim=True)
    if got.shape == expected.shape and _same(got, an @ bn.T):
        return "the norms were taken over dim=0 (columns): normalise each ROW (dim=-1)."
    return None


# --------------------------------------------------------------------------------------
# Chapter 2: the GRU cell
# --------------------------------------------------------------------------------------
_GRU_HINT = ("split x @ W_ih.T + b_ih and h @ W_hh.T + b_hh into their r, z, n thirds (.chunk(3, -1)); "
             "r = sigmoid(x_r + h_r), z = sigmoid(x_z + h_z), n = tanh(x_n + r * h_n), "
             "h' = (1 - z) * n + z * h.")

_CELL_NAMES = ("x", "h", "W_ih", "W_hh", "b_ih", "b_hh")


def _cell_cases(seed, gates):
    g = torch.Generator().manual_seed(seed)
    cases = []
    for description, B, input_size, H in [("B=2, 3 inputs, 4 units", 2, 3, 4),
                                          ("one example, 5 inputs, 2 units", 1, 5, 2),
                                          ("B=4, 2 inputs, 6 units", 4, 2, 6)]:
        x, h = _randn(g, B, input_size), _randn(g, B, H, scale=0.7)
        cases.append(Case(description, (x, h, *_rnn_params(g, input_size, H, gates)),
                          names=_CELL_NAMES))
    return cases


def _gru_reference(x, h, W_ih, W_hh, b_ih, b_hh):
    rnn = _rnn()
    return rnn.gru_step(torch.nn.functional.linear(x, W_ih, b_ih), h, W_hh, b_hh)


def check_gru_cell(fn: Callable) -> CheckResult:
    """Check ``fn(x, h, W_ih, W_hh, b_ih, b_hh) -> h'`` (torch's GRU: gates r, z, n)."""
    return _run_cases("check_gru_cell", fn, _gru_reference, _cell_cases(20, 3), _GRU_HINT,
                      diagnose=_diagnose_gru)


def _diagnose_gru(case: Case, got: Any, expected: Any) -> Optional[str]:
    x, h, W_ih, W_hh, b_ih, b_hh = case.args
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        return None
    xr, xz, xn = (x @ W_ih.T + b_ih).chunk(3, -1)
    hr, hz, hn = (h @ W_hh.T + b_hh).chunk(3, -1)
    r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
    n = torch.tanh(xn + r * hn)
    if _same(got, z * n + (1 - z) * h):
        return ("z and 1 - z are swapped: in torch's convention z is the share of the OLD state kept, "
                "h' = (1 - z) * n + z * h.")
    W_hn, b_hn = W_hh.chunk(3, 0)[2], b_hh.chunk(3, 0)[2]
    n_before = torch.tanh(xn + (r * h) @ W_hn.T + b_hn)
    if _same(got, (1 - z) * n_before + z * h):
        return ("the reset gate multiplies h before the matrix product (the paper's other variant); "
                "torch applies it after: n = tanh(x_n + r * (h @ W_hn.T + b_hn)).")
    if _same(got, (1 - z) * torch.tanh(xn + hn) + z * h):
        return "the reset gate is missing from the candidate: n = tanh(x_n + r * h_n)."
    hz2, hr2 = hr, hz
    r2, z2 = torch.sigmoid(xz + hz2), torch.sigmoid(xr + hr2)
    if _same(got, (1 - z2) * torch.tanh(xn + r2 * hn) + z2 * h):
        return "the r and z blocks are swapped: torch stacks the gates in the order r, z, n."
    return None


# --------------------------------------------------------------------------------------
# Chapter 2: the forget-gate bias
# --------------------------------------------------------------------------------------
_FORGET_HINT = ("the gates are stacked i, f, g, o, so rows H:2H of bias_ih and bias_hh belong to f. "
                "The gate sees b_ih + b_hh: set bias_ih[H:2H] = value and bias_hh[H:2H] = 0, "
                "under torch.no_grad(), leaving the other rows alone.")


def check_set_forget_bias(fn: Callable) -> CheckResult:
    """Check ``fn(lstm, value)`` sets the forget gate's total bias of a course_lib LSTM to value."""
    rnn = _rnn()
    name = "check_set_forget_bias"
    configs = [("one layer, 4 units, value 1", dict(input_size=3, hidden_size=4), 1.0),
               ("two layers, bidirectional, 3 units, value 2.5",
                dict(input_size=2, hidden_size=3, num_layers=2, bidirectional=True), 2.5),
               ("one layer, 5 units, value -1", dict(input_size=2, hidden_size=5), -1.0)]
    for i, (description, kwargs, value) in enumerate(configs, 1):
        torch.manual_seed(i)
        lstm = rnn.LSTM(**kwargs)
        before = {k: v.detach().clone() for k, v in lstm.named_parameters()}
        where = f"case {i} of {len(configs)} ({description}: LSTM({kwargs}))"
        case = Case(description, (lstm, value), names=("lstm", "value"))
        _call_learner(name, fn, case, where, _FORGET_HINT)
        problem = _forget_problem(lstm, before, value)
        if problem:
            raise ExerciseFailure(f"{name}: {where} failed.\n  {problem}\n  Hint: {_FORGET_HINT}")
    result = CheckResult(name, len(configs))
    print(result)
    return result


def _forget_problem(lstm, before, value) -> Optional[str]:
    H = lstm.hidden_size
    params = dict(lstm.named_parameters())
    for name, old in before.items():
        new = params[name].detach()
        if not name.startswith("bias"):
            if not torch.equal(new, old):
                return f"{name} changed: only the biases' forget block may change."
            continue
        blocks_new, blocks_old = new.chunk(4), old.chunk(4)
        for k, gate in enumerate("ifgo"):
            if gate != "f" and not torch.equal(blocks_new[k], blocks_old[k]):
                return (f"the {gate} block of {name} (rows {k * H}:{(k + 1) * H}) changed: the order "
                        f"is i, f, g, o, so the forget gate is rows {H}:{2 * H}.")
    for name in params:
        if name.startswith("bias_ih"):
            total = params[name][H:2 * H] + params[name.replace("bias_ih", "bias_hh")][H:2 * H]
            if torch.allclose(total, torch.full_like(total, 2 * value)) and value != 0:
                return (f"b_ih + b_hh of the forget gate is {2 * value}, twice the value: the gate "
                        "adds both biases, so set one to value and the other to 0.")
            if not torch.allclose(total, torch.full_like(total, value)):
                return (f"in {name} (+ its bias_hh), the forget gate's total bias is "
                        f"{total.detach().tolist()}, expected {value} everywhere (every layer and "
                        "direction).")
    return None


# --------------------------------------------------------------------------------------
# Chapter 2: a bidirectional layer from two directions
# --------------------------------------------------------------------------------------
_BIDIR_HINT = ("run `forward` on x as it is; run `backward` on x.flip(1) and flip its outputs back "
               "with .flip(1), so that position t holds what the backward pass computed at t; "
               "concatenate the two along the last dim: (B, T, 2H).")


def check_bidirectional(fn: Callable) -> CheckResult:
    """Check ``fn(forward, backward, x) -> (B, T, 2H)``: the output of a bidirectional layer."""
    rnn = _rnn()
    g = torch.Generator().manual_seed(21)
    cases = []
    for i, (description, kind, B, T, input_size, H) in enumerate(
            [("GRU, B=2, T=5", "gru", 2, 5, 3, 4), ("RNN, B=1, T=7", "rnn", 1, 7, 2, 3),
             ("LSTM, B=3, T=4", "lstm", 3, 4, 2, 2)]):
        torch.manual_seed(30 + i)
        layer_cls = {"rnn": rnn.RNN, "lstm": rnn.LSTM, "gru": rnn.GRU}[kind]
        cases.append(Case(description, (layer_cls(input_size, H), layer_cls(input_size, H),
                                        _randn(g, B, T, input_size)),
                          names=("forward", "backward", "x")))

    def reference(forward, backward, x):
        both = type(forward)(forward.input_size, forward.hidden_size, bidirectional=True)
        state = {k: v for k, v in forward.state_dict().items()}
        state.update({f"{k}_reverse": v for k, v in backward.state_dict().items()})
        both.load_state_dict(state)
        with torch.no_grad():
            return both(x)[0]

    def learner(fn):
        def run(forward, backward, x):
            out = fn(forward, backward, x)
            return out.detach() if isinstance(out, torch.Tensor) else out
        return run

    return _run_cases("check_bidirectional", learner(fn), reference, cases, _BIDIR_HINT,
                      diagnose=_diagnose_bidirectional)


def _diagnose_bidirectional(case: Case, got: Any, expected: Any) -> Optional[str]:
    forward, backward, x = case.args
    if isinstance(got, tuple):
        return "return only the output tensor (B, T, 2H), not the (output, state) pair."
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        return None
    with torch.no_grad():
        fwd = forward(x)[0]
        bwd_unflipped = backward(x.flip(1))[0]
        if _same(got, torch.cat([fwd, bwd_unflipped], -1)):
            return ("the backward outputs are in reversed time order: flip them back with .flip(1) "
                    "before concatenating, so position t lines up with x[:, t].")
        if _same(got, torch.cat([fwd, backward(x)[0]], -1)):
            return "the backward layer read x in the forward order: give it x.flip(1)."
        H = forward.hidden_size
        if _same(got[..., H:], expected[..., :H]) and _same(got[..., :H], expected[..., H:]):
            return "the two halves are swapped: forward direction first, then backward."
    return None


# --------------------------------------------------------------------------------------
# Chapter 2: sampling with a temperature
# --------------------------------------------------------------------------------------
_SAMPLE_HINT = ("temperature 0: return logits.argmax(-1). Otherwise probs = softmax(logits / temperature, "
                "dim=-1) and torch.multinomial(probs, 1, generator=generator).squeeze(-1): one id per row.")

_DRAWS = 4000


def check_sample_next(fn: Callable) -> CheckResult:
    """Check ``fn(logits (B, V), temperature, generator) -> ids (B,)`` samples softmax(logits / T).

    The ids drawn for many copies of a few rows of logits must follow the expected
    distribution (total variation below 0.05); temperature 0 must give the argmax.
    """
    name = "check_sample_next"
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0], [0.5, 3.0, 0.2, 0.1]])
    cases = [(f"temperature {t}", t) for t in (1.0, 0.5, 2.0, 0.0)]
    for i, (description, temperature) in enumerate(cases, 1):
        batch = logits.repeat(_DRAWS, 1)  # (2 * _DRAWS, V)
        where = (f"case {i} of {len(cases)} ({description}; logits of shape {tuple(batch.shape)}: "
                 f"{_DRAWS} copies of {logits.tolist()})")
        case = Case(description, (batch, temperature, torch.Generator().manual_seed(i)),
                    names=("logits", "temperature", "generator"))
        got = _call_learner(name, fn, case, where, _SAMPLE_HINT)
        problem = _sample_problem(got, batch, logits, temperature)
        if problem:
            raise ExerciseFailure(f"{name}: {where} failed.\n  {problem}\n  Hint: {_SAMPLE_HINT}")
    result = CheckResult(name, len(cases))
    print(result)
    return result


def _frequencies(ids, rows, V):
    """Empirical distribution of the ids drawn for each of the `rows` distinct logits rows."""
    ids = ids.reshape(-1, rows)  # (_DRAWS, rows): the batch repeats the rows in order
    return torch.stack([torch.bincount(ids[:, r], minlength=V).double() / len(ids) for r in range(rows)])


def _sample_problem(got, batch, logits, temperature) -> Optional[str]:
    rows, V = logits.shape
    if not isinstance(got, torch.Tensor):
        return f"expected a tensor of ids, got {type(got).__name__}."
    if got.shape != (batch.shape[0],):
        return (f"expected shape {(batch.shape[0],)} (one id per row of logits), got {tuple(got.shape)}"
                + (": add .squeeze(-1) after torch.multinomial(probs, 1)." if got.dim() == 2 else "."))
    if got.is_floating_point() or got.dtype == torch.bool:
        return f"expected integer ids (torch.long), got dtype {got.dtype}."
    if int(got.min()) < 0 or int(got.max()) >= V:
        return f"ids must lie in 0..{V - 1}, got values from {int(got.min())} to {int(got.max())}."
    freq = _frequencies(got, rows, V)
    if temperature == 0:
        greedy = torch.nn.functional.one_hot(logits.argmax(-1), V).double()
        if torch.equal(freq, greedy):
            return None
        return "temperature 0 must be greedy: always the argmax of each row (no sampling)."
    expected = torch.softmax(logits.double() / temperature, dim=-1)
    tv = lambda p: float((freq - p).abs().sum(-1).max() / 2)  # noqa: E731 - total variation
    if tv(expected) < 0.05:
        return None
    message = (f"the ids do not follow softmax(logits / {temperature}): observed frequencies "
               f"{[[round(v, 3) for v in row] for row in freq.tolist()]}, expected about "
               f"{[[round(v, 3) for v in row] for row in expected.tolist()]}.")
    if tv(torch.softmax(logits.double() * temperature, -1)) < 0.05:
        return message + "\n  Likely cause: the logits are multiplied by the temperature; divide them."
    if tv(torch.softmax(logits.double(), -1)) < 0.05:
        return message + "\n  Likely cause: the temperature is ignored."
    if tv(torch.full_like(expected, 1 / V)) < 0.05:
        return message + "\n  Likely cause: ids are drawn uniformly; draw them with the probabilities."
    return message
