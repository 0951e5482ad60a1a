"""course_lib.adding: the adding problem, its baselines, the recipe and the analyses of
chapter 1 (which value a model remembers, the gradient as a sum over time)."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_lib import adding


class Oracle(nn.Module):
    """Computes the target exactly, with weights on the two marked values (1, 1 = the sum)."""

    def __init__(self, w1=1.0, w2=1.0, T=None):
        super().__init__()
        self.w1, self.w2 = w1, w2

    def forward(self, x):
        values, markers = x[..., 0], x[..., 1]  # (B, T)
        first = markers.cumsum(1) == 1  # up to the second marker
        weights = torch.where(first, self.w1, self.w2)
        return (values * markers * weights).sum(1) + 0.5 * (2 - self.w1 - self.w2)


def test_adding_batch_has_one_marker_in_each_half():
    x, y, where = adding.adding_batch(500, 12, torch.Generator().manual_seed(0))
    assert x.shape == (500, 12, 2) and y.shape == (500,) and where.shape == (500, 2)
    markers = x[..., 1]
    assert torch.all(markers.sum(1) == 2)
    assert torch.all(markers[:, :6].sum(1) == 1) and torch.all(markers[:, 6:].sum(1) == 1)
    rows = torch.arange(500)
    assert (
        torch.all(markers[rows, where[:, 0]] == 1)
        and torch.all(where[:, 0] < 6)
        and torch.all(where[:, 1] >= 6)
    )
    assert torch.allclose(y, x[rows, where[:, 0], 0] + x[rows, where[:, 1], 0])
    with pytest.raises(ValueError, match="T must be an int >= 2"):
        adding.adding_batch(4, 1)


def test_the_two_baselines():
    x, y, where = adding.adding_batch(200_000, 10, torch.Generator().manual_seed(1))
    assert F.mse_loss(torch.ones_like(y), y).item() == pytest.approx(adding.NO_MEMORY_MSE, rel=0.02)
    second_only = x[torch.arange(len(y)), where[:, 1], 0] + 0.5
    assert F.mse_loss(second_only, y).item() == pytest.approx(adding.ONE_VALUE_MSE, rel=0.02)


def test_remembered_values_and_gain_recognise_what_a_model_uses():
    both = adding.remembered_values(Oracle(1, 1), 10)
    assert both["b1"] == pytest.approx(1, abs=1e-4) and both["b2"] == pytest.approx(1, abs=1e-4)
    assert both["mse"] < 1e-10 and both["r2"] == pytest.approx(1)
    second = adding.remembered_values(Oracle(0, 1), 10)
    assert second["b1"] == pytest.approx(0, abs=1e-4) and second["b2"] == pytest.approx(1, abs=1e-4)
    assert second["mse"] == pytest.approx(adding.ONE_VALUE_MSE, rel=0.05)
    gain = adding.marked_value_gain(Oracle(0, 1), 10)
    assert torch.allclose(gain, torch.tensor([0.0] * 5 + [1.0] * 5))


def test_regressor_inits():
    torch.manual_seed(0)
    irnn = adding.AddingRegressor("rnn", 8, init="identity")
    assert irnn.rnn.nonlinearity == "relu" and torch.equal(irnn.rnn.weight_hh_l0, torch.eye(8))
    assert torch.all(irnn.rnn.bias_hh_l0 == 0) and torch.all(irnn.rnn.bias_ih_l0 == 0)
    w = adding.AddingRegressor("rnn", 8, init="orthogonal").rnn.weight_hh_l0
    assert torch.allclose(w @ w.T, torch.eye(8), atol=1e-5)
    with pytest.raises(ValueError, match="init='identity' is for cell='rnn'"):
        adding.AddingRegressor("lstm", 8, init="identity")
    with pytest.raises(ValueError, match="cell must be one of"):
        adding.AddingRegressor("transformer")


def test_truncation_cuts_the_gradient_not_the_state():
    torch.manual_seed(0)
    model = adding.AddingRegressor("rnn", 8)
    x = torch.rand(3, 10, 2, requires_grad=True)
    full, cut = model(x), model(x, truncate=4)
    assert torch.allclose(full, cut, atol=1e-6)  # the same prediction: the state flows on
    grad = torch.autograd.grad(cut.sum(), x)[0]
    assert torch.all(grad[:, :6] == 0) and torch.any(grad[:, 6:] != 0)  # only the last 4 steps


def test_temporal_contributions_sum_to_the_gradient():
    torch.manual_seed(0)
    for init in ("default", "identity"):
        model = adding.AddingRegressor("rnn", 6, init=init)
        x, y, _ = adding.adding_batch(16, 7, torch.Generator().manual_seed(2))
        G = adding.temporal_contributions(model, x, y)
        assert G.shape == (7, 6, 6)
        F.mse_loss(model(x), y).backward()
        assert torch.allclose(G.sum(0), model.rnn.weight_hh_l0.grad, atol=1e-6)
    with pytest.raises(ValueError, match="needs a vanilla RNN, got LSTM"):
        adding.temporal_contributions(adding.AddingRegressor("lstm", 4), x, y)


def test_train_adding_learns_a_short_lag_and_is_reproducible():
    torch.set_num_threads(1)
    runs = [adding.train_adding("rnn", 4, steps=300, seed=3, eval_every=100) for _ in range(2)]
    (model, history), (_, again) = runs
    assert history.train_loss == again.train_loss
    assert [s for s, _ in history.evals] == [100, 200, 300]
    mse = adding.adding_mse(model, 4)
    assert mse == pytest.approx(history.evals[-1][1], rel=1e-5)
    assert mse < 0.3 * adding.NO_MEMORY_MSE, mse


def test_train_gated_adding_is_train_adding_plus_the_gate_bias():
    torch.set_num_threads(1)
    for cell, hidden in (("lstm", 6), ("gru", 7)):
        _, plain = adding.train_adding(cell, 6, steps=20, seed=2, hidden_size=hidden, eval_every=10)
        _, same = adding.train_gated_adding(cell, 6, steps=20, seed=2, hidden_size=hidden, eval_every=10)
        assert same.train_loss == plain.train_loss and same.evals == plain.evals  # gate_bias None
        _, biased = adding.train_gated_adding(cell, 6, steps=1, gate_bias=1.0, seed=2, hidden_size=hidden)
        assert biased.train_loss != plain.train_loss[:1]
    with pytest.raises(ValueError, match="cell"):
        adding.train_gated_adding("rnn", 6, steps=1)


def test_train_gated_adding_starts_with_the_gate_bias():
    torch.set_num_threads(1)
    for cell in ("lstm", "gru"):
        model, _ = adding.train_gated_adding(cell, 6, steps=1, gate_bias=2.0, seed=0, hidden_size=5, lr=0.0)
        both = model.rnn.bias_ih_l0[5:10] + model.rnn.bias_hh_l0[5:10]  # the f (LSTM) or z (GRU) block
        assert torch.allclose(both, torch.full((5,), 2.0))


def test_train_clipping_reports_the_finite_steps():
    torch.set_num_threads(1)
    clipped = adding.train_clipping(1.0, steps=20, seed=0)
    assert clipped["steps_finite"] == 20 and 0 < clipped["loss_last50"] < 10
    exploding = adding.train_clipping(None, steps=20, gain=2.0, lr=1e6, seed=0)  # a huge step
    assert exploding["steps_finite"] < 20
