"""The exercise checks of the RNN chapters pass on correct answers, raise ExerciseNotAttempted on
the stub, and name the typical mistakes."""

import pytest
import torch

from check_failures import fails_with
from course_lib import decoding, rnn
from course_lib.exercises import (
    CheckResult,
    ExerciseFailure,
    ExerciseNotAttempted,
    check_bidirectional,
    check_bptt_jacobian,
    check_clip_grad_norm,
    check_cosine_similarity,
    check_gru_cell,
    check_rnn_forward,
    check_sample_next,
    check_set_forget_bias,
)


def stub(*args, **kwargs):
    raise NotImplementedError("Exercise: write your solution here")


# ---- correct answers, written as a learner would ------------------------------------------


def good_cosine(a, b):
    return (a / a.norm(dim=-1, keepdim=True)) @ (b / b.norm(dim=-1, keepdim=True)).T


def good_forward(x, h0, W_ih, W_hh, b_ih, b_hh):
    h, outs = h0, []
    for t in range(x.shape[1]):
        h = torch.tanh(x[:, t] @ W_ih.T + b_ih + h @ W_hh.T + b_hh)
        outs.append(h)
    return torch.stack(outs, 1), h


def good_jacobian(W_hh, hs):
    J = torch.eye(W_hh.shape[0])
    for h in hs:
        J = torch.diag(1 - h**2) @ W_hh @ J
    return J


def good_clip(grads, max_norm):
    total = torch.sqrt(sum((g**2).sum() for g in grads))
    return [g * min(1.0, max_norm / float(total)) for g in grads]


def good_gru(x, h, W_ih, W_hh, b_ih, b_hh):
    xr, xz, xn = (x @ W_ih.T + b_ih).chunk(3, -1)
    hr, hz, hn = (h @ W_hh.T + b_hh).chunk(3, -1)
    r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
    return (1 - z) * torch.tanh(xn + r * hn) + z * h


def good_forget(lstm, value):
    H = lstm.hidden_size
    with torch.no_grad():
        for name, p in lstm.named_parameters():
            if name.startswith("bias_ih"):
                p[H : 2 * H] = value
            elif name.startswith("bias_hh"):
                p[H : 2 * H] = 0


def good_bidirectional(forward, backward, x):
    return torch.cat([forward(x)[0], backward(x.flip(1))[0].flip(1)], -1)


def good_sample(logits, temperature, generator=None):
    if temperature == 0:
        return logits.argmax(-1)
    return torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=generator)[:, 0]


CHECKS = [
    (check_cosine_similarity, good_cosine),
    (check_rnn_forward, good_forward),
    (check_bptt_jacobian, good_jacobian),
    (check_clip_grad_norm, good_clip),
    (check_gru_cell, good_gru),
    (check_set_forget_bias, good_forget),
    (check_bidirectional, good_bidirectional),
    (check_sample_next, good_sample),
]


@pytest.mark.parametrize("check, good", CHECKS, ids=[c.__name__ for c, _ in CHECKS])
def test_passes_on_a_correct_answer(check, good, capsys):
    result = check(good)
    assert isinstance(result, CheckResult) and result.name == check.__name__, result
    assert f"✓ {check.__name__}: all" in capsys.readouterr().out


@pytest.mark.parametrize("check", [c for c, _ in CHECKS], ids=[c.__name__ for c, _ in CHECKS])
def test_stub_is_not_attempted(check):
    with pytest.raises(ExerciseNotAttempted, match="not implemented yet"):
        check(stub)


def test_library_versions_are_refused():
    """The exercises ask for these functions: the chapter's own versions are off limits."""
    shortcuts = [
        (check_gru_cell, lambda x, h, W_ih, W_hh, b_ih, b_hh: rnn.gru_step(x @ W_ih.T + b_ih, h, W_hh, b_hh)),
        (check_set_forget_bias, rnn.set_forget_bias),
        (
            check_sample_next,
            lambda logits, t, generator=None: decoding.sample_next(logits, t, generator=generator),
        ),
    ]
    for check, shortcut in shortcuts:
        with pytest.raises(ExerciseFailure, match="off limits"):
            check(shortcut)


# ---- typical mistakes, each recognised ------------------------------------------------------


def test_cosine_mistakes():
    fails_with(check_cosine_similarity, lambda a, b: a @ b.T, "dot products")
    fails_with(
        check_cosine_similarity,
        lambda a, b: (a / a.norm(dim=0, keepdim=True)) @ (b / b.norm(dim=0, keepdim=True)).T,
        "dim=0",
    )


def test_rnn_forward_mistakes():
    def no_feedback(x, h0, W_ih, W_hh, b_ih, b_hh):
        outs = [torch.tanh(x[:, t] @ W_ih.T + b_ih + h0 @ W_hh.T + b_hh) for t in range(x.shape[1])]
        return torch.stack(outs, 1), outs[-1]

    def shifted(x, h0, W_ih, W_hh, b_ih, b_hh):
        h, outs = h0, []
        for t in range(x.shape[1]):
            outs.append(h)
            h = torch.tanh(x[:, t] @ W_ih.T + b_ih + h @ W_hh.T + b_hh)
        return torch.stack(outs, 1), h

    def time_first(x, h0, *params):
        outs, h = good_forward(x, h0, *params)
        return outs.transpose(0, 1), h

    fails_with(check_rnn_forward, no_feedback, "feed the new state back")
    fails_with(check_rnn_forward, shifted, "shifted by one step")
    fails_with(check_rnn_forward, time_first, "(T, B, H)")
    fails_with(check_rnn_forward, lambda *args: good_forward(*args)[0], "return a pair")


def test_jacobian_mistakes():
    def reversed_order(W_hh, hs):
        J = torch.eye(W_hh.shape[0])
        for h in hs:
            J = J @ torch.diag(1 - h**2) @ W_hh
        return J

    def no_derivative(W_hh, hs):
        J = torch.eye(W_hh.shape[0])
        for _ in hs:
            J = W_hh @ J
        return J

    fails_with(check_bptt_jacobian, reversed_order, "wrong order")
    fails_with(check_bptt_jacobian, no_derivative, "derivative is missing")
    fails_with(check_bptt_jacobian, lambda W, hs: good_jacobian(W, hs).T, "transposed")


def test_clip_mistakes():
    per_tensor = lambda grads, c: [g * min(1.0, c / float(g.norm())) for g in grads]  # noqa: E731
    clamped = lambda grads, c: [g.clamp(-c, c) for g in grads]  # noqa: E731

    def always_rescale(grads, c):
        total = torch.sqrt(sum((g**2).sum() for g in grads))
        return [g * c / total for g in grads]

    fails_with(check_clip_grad_norm, per_tensor, "GLOBAL norm")
    fails_with(check_clip_grad_norm, clamped, "clamped one by one")
    fails_with(check_clip_grad_norm, always_rescale, "scaled UP")


def test_gru_mistakes():
    def swapped_z(x, h, W_ih, W_hh, b_ih, b_hh):
        xr, xz, xn = (x @ W_ih.T + b_ih).chunk(3, -1)
        hr, hz, hn = (h @ W_hh.T + b_hh).chunk(3, -1)
        r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
        return z * torch.tanh(xn + r * hn) + (1 - z) * h

    def reset_before(x, h, W_ih, W_hh, b_ih, b_hh):
        xr, xz, xn = (x @ W_ih.T + b_ih).chunk(3, -1)
        hr, hz, _ = (h @ W_hh.T + b_hh).chunk(3, -1)
        r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
        W_hn, b_hn = W_hh.chunk(3)[2], b_hh.chunk(3)[2]
        return (1 - z) * torch.tanh(xn + (r * h) @ W_hn.T + b_hn) + z * h

    fails_with(check_gru_cell, swapped_z, "swapped")
    fails_with(check_gru_cell, reset_before, "before the matrix product")


def test_forget_bias_mistakes():
    def both_biases(lstm, value):
        H = lstm.hidden_size
        with torch.no_grad():
            for name, p in lstm.named_parameters():
                if name.startswith("bias"):
                    p[H : 2 * H] = value

    def input_gate(lstm, value):
        H = lstm.hidden_size
        with torch.no_grad():
            for name, p in lstm.named_parameters():
                if name.startswith("bias_ih"):
                    p[:H] = value

    def first_layer_only(lstm, value):
        H = lstm.hidden_size
        with torch.no_grad():
            lstm.bias_ih_l0[H : 2 * H] = value
            lstm.bias_hh_l0[H : 2 * H] = 0

    fails_with(check_set_forget_bias, both_biases, "twice the value")
    fails_with(check_set_forget_bias, input_gate, "the i block")
    fails_with(check_set_forget_bias, first_layer_only, "every layer and direction")


def test_bidirectional_mistakes():
    no_flip_back = lambda f, b, x: torch.cat([f(x)[0], b(x.flip(1))[0]], -1)  # noqa: E731
    no_flip = lambda f, b, x: torch.cat([f(x)[0], b(x)[0]], -1)  # noqa: E731
    swapped = lambda f, b, x: torch.cat([b(x.flip(1))[0].flip(1), f(x)[0]], -1)  # noqa: E731
    fails_with(check_bidirectional, no_flip_back, "reversed time order")
    fails_with(check_bidirectional, no_flip, "give it x.flip(1)")
    fails_with(check_bidirectional, swapped, "swapped")


def test_sample_mistakes():
    def multiplied(logits, t, generator=None):
        return torch.multinomial(torch.softmax(logits * max(t, 1e-3), -1), 1, generator=generator)[:, 0]

    def ignores_temperature(logits, t, generator=None):
        return torch.multinomial(torch.softmax(logits, -1), 1, generator=generator)[:, 0]

    def keeps_dim(logits, t, generator=None):
        return good_sample(logits, t, generator)[:, None]

    def uniform(logits, t, generator=None):
        return torch.randint(0, logits.shape[-1], logits.shape[:1], generator=generator)

    def floats(logits, t, generator=None):
        return good_sample(logits, t, generator).float()

    fails_with(check_sample_next, multiplied, "multiplied by the temperature")
    fails_with(check_sample_next, ignores_temperature, "temperature is ignored")
    fails_with(check_sample_next, keeps_dim, ".squeeze(-1)")
    fails_with(check_sample_next, uniform, "uniformly")
    fails_with(check_sample_next, floats, "torch.long")

    def greedy_wrong(logits, t, generator=None):
        return good_sample(logits, max(t, 1e-2), generator) if t else logits.argmin(-1)

    fails_with(check_sample_next, greedy_wrong, "temperature 0 must be greedy")


def test_learner_errors_are_reported_with_the_line():
    def broken(x, h, W_ih, W_hh, b_ih, b_hh):
        return x @ W_hh  # wrong shapes

    message = fails_with(check_gru_cell, broken, "your function raised RuntimeError")
    assert "x @ W_hh" in message


def test_check_needs_a_function():
    with pytest.raises(ExerciseFailure, match="expects a function"):
        check_gru_cell(
            good_gru(
                torch.zeros(1, 1),
                torch.zeros(1, 1),
                torch.zeros(3, 1),
                torch.zeros(3, 1),
                torch.zeros(3),
                torch.zeros(3),
            )
        )
