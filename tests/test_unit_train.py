"""course_lib.train: the loop trains, evaluates, reports; the metrics are right."""

import math

import pytest
import torch
from torch import nn

from course_lib import train
from course_lib.train import (
    bits_per_char,
    default_device,
    exact_match,
    fit,
    lm_heldout_loss,
    position_accuracy,
    seed_everything,
    to_device,
)


def test_fit_learns_a_linear_map_and_records_history():
    seed_everything(0)
    w_true = torch.randn(3, 1)
    model = nn.Linear(3, 1)

    def batch(step):
        x = torch.randn(32, 3)
        return x, x @ w_true

    evals = []
    history = fit(
        model,
        lambda m, b: ((m(b[0]) - b[1]) ** 2).mean(),
        batch,
        steps=300,
        lr=0.05,
        eval_fn=lambda m: evals.append(m.training) or m.weight.detach().clone(),
        eval_every=100,
        progress=False,
    )
    assert history.steps == list(range(1, 301)) and len(history.train_loss) == 300
    assert history.train_loss[-1] < 1e-3 < history.train_loss[0]
    assert [s for s, _ in history.evals] == [100, 200, 300] and evals == [False] * 3
    assert torch.allclose(history.evals[-1][1].T, w_true, atol=0.02)
    assert model.training and history.seconds > 0


def test_fit_cycles_an_iterable_and_stops_on_nan():
    model = nn.Linear(1, 1)
    data = [(torch.ones(1, 1), torch.ones(1, 1))] * 3
    assert (
        len(fit(model, lambda m, b: ((m(b[0]) - b[1]) ** 2).mean(), data, steps=7, progress=False).train_loss)
        == 7
    )
    with pytest.raises(FloatingPointError, match="loss is nan at step 1"):
        fit(model, lambda m, b: m(b[0]).sum() * float("nan"), data, steps=2, progress=False)
    with pytest.raises(ValueError, match="steps must be >= 1"):
        fit(model, lambda m, b: m(b[0]).sum(), data, steps=0)


def test_seed_everything_makes_runs_repeatable():
    seed_everything(3)
    a = torch.randn(4)
    seed_everything(3)
    assert torch.equal(a, torch.randn(4))


def test_devices():
    assert default_device().type == ("cuda" if torch.cuda.is_available() else "cpu")
    moved = to_device({"a": torch.ones(1), "b": [torch.zeros(1), 3]}, "cpu")
    assert moved["b"][1] == 3 and moved["a"].device.type == "cpu"


def test_sequence_metrics():
    assert exact_match(["ab", "cd", "ef"], ["ab", "cx", "ef"]) == pytest.approx(2 / 3)
    assert position_accuracy(["ab", "c"], ["ab", "cd"]) == pytest.approx(3 / 4)
    with pytest.raises(ValueError, match="2 predictions for 1 targets"):
        exact_match(["a", "b"], ["a"])


def test_lm_heldout_loss_of_a_uniform_model_is_log_vocab():
    V = 7

    class Uniform(nn.Module):
        def __init__(self):
            super().__init__()
            self.p = nn.Parameter(torch.zeros(1))

        def forward(self, x):
            return torch.zeros(*x.shape, V) + self.p

    nats = lm_heldout_loss(Uniform(), torch.randint(0, V, (1000,)), seq_len=50, batch_size=4)
    assert nats == pytest.approx(math.log(V), rel=1e-6)
    assert bits_per_char(nats) == pytest.approx(math.log2(V), rel=1e-6)
    with pytest.raises(ValueError, match="longer than seq_len=256"):
        lm_heldout_loss(Uniform(), torch.arange(10))


def test_set_threads_caps_at_the_environment_variable(monkeypatch):
    before = torch.get_num_threads()
    try:
        monkeypatch.delenv("COURSE_LIB_THREADS", raising=False)
        assert train.set_threads(2) == 2 and torch.get_num_threads() == 2
        monkeypatch.setenv("COURSE_LIB_THREADS", "1")
        assert train.set_threads(2) == 1 and torch.get_num_threads() == 1
        assert train.set_threads(1) == 1
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("n", [0, -1, 1.5, True, "2"])
def test_set_threads_names_a_bad_count(n):
    with pytest.raises(ValueError, match="n must be a positive int"):
        train.set_threads(n)


def test_set_threads_names_a_bad_cap(monkeypatch):
    monkeypatch.setenv("COURSE_LIB_THREADS", "two")
    with pytest.raises(ValueError, match="COURSE_LIB_THREADS"):
        train.set_threads(2)
