"""What is special about the checks of chapters 5 and 6 (the generic record tests are in
test_exercises_records.py)."""

import math

import pytest
import torch

from check_failures import fails_with
from course_lib.exercises import (
    check_attention_grad_q,
    check_decay_weights,
    check_tied_qk_prediction,
)


def test_a_float32_decaying_average_built_with_where_passes(capsys):
    def mine(T, gamma):
        i = torch.arange(T)
        age = (i[:, None] - i[None, :]).float()
        w = torch.where(age >= 0, gamma**age, torch.zeros(()))
        return w / w.sum(-1, keepdim=True)

    check_decay_weights(mine)
    assert "all 4 cases passed" in capsys.readouterr().out


def test_the_gradient_by_hand_passes_and_autograd_does_not():
    def by_hand(q, k, v, grad_out):
        scale = math.sqrt(q.shape[-1])
        p = torch.softmax(q @ k.transpose(-2, -1) / scale, dim=-1)
        dp = grad_out @ v.transpose(-2, -1)
        return (p * (dp - (p * dp).sum(-1, keepdim=True))) @ k / scale

    def with_autograd(q, k, v, grad_out):
        q = q.clone().requires_grad_(True)
        out = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1) @ v
        return torch.autograd.grad(out, q, grad_out)[0]

    def last_step_unscaled(q, k, v, grad_out):
        return by_hand(q, k, v, grad_out) * math.sqrt(q.shape[-1])

    check_attention_grad_q(by_hand)  # raises ExerciseFailure if it does not pass
    fails_with(check_attention_grad_q, with_autograd, "called torch.autograd.grad", "off limits")
    fails_with(check_attention_grad_q, last_step_unscaled, "the last step drops the 1/sqrt(d_k)")

    def with_torch_func(q, k, v, grad_out):
        def loss(q_):
            weights = torch.softmax(q_ @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1)
            return (weights @ v * grad_out).sum()

        return torch.func.grad(loss)(q)

    fails_with(check_attention_grad_q, with_torch_func, "called torch.func.grad", "off limits")


def test_the_tied_projection_experiment_gives_the_recorded_example():
    """The chapter's experiment (seed 0) measures the record's example value."""
    from course_lib import attention as A

    g = torch.Generator().manual_seed(0)
    X = torch.randn(200, 8, 64, generator=g)
    W = torch.randn(64, 4, generator=g) / math.sqrt(64)
    _, w = A.scaled_dot_product_attention(X @ W, X @ W, X)
    measured = (w.argmax(-1) == torch.arange(8)).float().mean().item()
    print(f"measured {measured:.4f}, recorded example {check_tied_qk_prediction.example}")
    assert measured == pytest.approx(check_tied_qk_prediction.example, abs=0.01)
