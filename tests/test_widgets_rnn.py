"""The RNN chapters' explorers: frames hold the right numbers (checked against autograd and
course_lib), every control value has a frame, specs stay small, bad input is rejected."""

import json
import re

import matplotlib
import pytest
import torch

matplotlib.use("Agg")

from course_lib import rnn
from course_lib.gpt import known_word_share
from course_lib.rnn_gradients import orthogonal_recurrent_weight
from course_lib.widgets import (
    FORGET_BIAS_OPTIONS,
    GAIN_OPTIONS,
    NONLINEARITY_OPTIONS,
    TEMPERATURE_OPTIONS,
    ForgetBiasExplorer,
    GradientFlowExplorer,
    TemperatureExplorer,
    frame_key,
    gradient_reach,
    hidden_jacobians,
    jacobian_norms,
)


def stats(frame):
    return {s["name"]: s["value"] for s in frame["stats"]}


# ---- the measurements ---------------------------------------------------------------------


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu", "linear"])
def test_hidden_jacobians_match_autograd(nonlinearity):
    torch.manual_seed(0)
    H, T = 5, 7
    w = orthogonal_recurrent_weight(H, 1.3, seed=2)
    x_proj = 0.7 * torch.randn(1, T, H, dtype=torch.float64)
    act = {"tanh": torch.tanh, "relu": torch.relu, "linear": lambda a: a}[nonlinearity]

    def h_T(h0):
        h = h0
        for t in range(T):
            h = act(x_proj[0, t] + h @ w.T)
        return h

    h0 = torch.zeros(H, dtype=torch.float64)
    expected = torch.autograd.functional.jacobian(h_T, h0)
    assert torch.allclose(hidden_jacobians(w, x_proj, nonlinearity)[-1, 0], expected, atol=1e-10)


def test_orthogonal_weight_has_every_singular_value_equal_to_the_gain():
    s = torch.linalg.svdvals(orthogonal_recurrent_weight(16, 0.7))
    assert torch.allclose(s, torch.full_like(s, 0.7))


def test_linear_norms_are_exactly_gain_to_the_t():
    for gain in [0.8, 1.0, 1.2]:
        norms = jacobian_norms(gain, "linear", steps=30)
        assert torch.allclose(norms, gain ** torch.arange(31, dtype=torch.float64), rtol=1e-8)


@pytest.mark.slow
def test_tanh_vanishes_below_and_at_gain_one_and_explodes_at_two():
    assert jacobian_norms(0.9, "tanh")[100] < 1e-10
    assert jacobian_norms(1.0, "tanh")[100] < 1e-6
    assert jacobian_norms(2.0, "tanh")[100] > 1e3


@pytest.mark.slow
def test_gradient_reach_of_the_lstm_grows_with_the_forget_bias():
    reach = {b: gradient_reach("lstm", b, steps=50)["reach"][50].item() for b in (0.0, 1.0, 3.0)}
    assert reach[0.0] < 1e-6 < reach[1.0] < 1e-2 < reach[3.0]
    assert gradient_reach("rnn", steps=50)["reach"][50] < 1e-12


def test_gradient_reach_starts_at_one_and_matches_autograd_at_one_step():
    out = gradient_reach("lstm", 1.0, steps=5, batch=1)
    assert out["reach"][0] == pytest.approx(1.0)
    assert out["forget_product"][0] == pytest.approx(1.0)
    # one step back, along every path: rebuild the same cell and differentiate c_T w.r.t. c_{T-1}
    torch.manual_seed(0)
    cell = rnn.set_forget_bias(rnn.LSTMCell(32, 64), 1.0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(5, 1, 32, generator=g)
    u = torch.nn.functional.normalize(torch.randn(64, generator=g), dim=0)
    h, c = torch.zeros(1, 64), torch.zeros(1, 64)
    cs = []
    for t in range(5):
        h, c = cell(x[t], (h, c))
        cs.append(c)
    (grad,) = torch.autograd.grad(cs[-1] @ u, cs[-2])  # every path from c_{T-1} to c_T
    assert out["reach"][1].item() == pytest.approx(grad.norm().item(), rel=1e-4)


def test_gradient_reach_along_the_direct_path_alone_is_the_forget_gate_product():
    full = gradient_reach("lstm", 1.0, steps=30)
    direct = gradient_reach("lstm", 1.0, steps=30, direct_only=True)
    assert torch.allclose(direct["reach"], direct["forget_product"], rtol=1e-10)
    assert torch.allclose(direct["forget_product"], full["forget_product"], rtol=1e-10)
    assert full["reach"][30] > 10 * direct["reach"][30]  # the other paths add to it
    with pytest.raises(ValueError, match="direct_only is for kind='lstm'"):
        gradient_reach("gru", direct_only=True)


def test_gradient_reach_in_float32_underflows_to_zero():
    r64, r32 = gradient_reach("rnn")["reach"], gradient_reach("rnn", dtype=torch.float32)["reach"]
    assert r64.dtype == torch.float64 and torch.all(r64 > 0)
    assert r32[-1] == 0 and torch.allclose(r32[:40].double(), r64[:40], rtol=1e-3)


def test_gradient_reach_rejects_unknown_kinds():
    with pytest.raises(ValueError, match="kind"):
        gradient_reach("transformer")
    with pytest.raises(ValueError, match="nonlinearity"):
        hidden_jacobians(torch.eye(2), torch.zeros(1, 3, 2), "sigmoid")


# ---- the explorers ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def flow():
    return GradientFlowExplorer()


@pytest.fixture(scope="module")
def forget():
    return ForgetBiasExplorer()


@pytest.fixture(scope="module")
def temperature(tiny_lm):
    model, vocab, text = tiny_lm
    return TemperatureExplorer(model, vocab, text, prompt="the ", length=40)


@pytest.mark.slow
def test_one_frame_per_combination(flow, forget, temperature):
    assert set(flow.spec["frames"]) == {
        frame_key((i, j)) for i in range(len(GAIN_OPTIONS)) for j in range(len(NONLINEARITY_OPTIONS))
    }
    assert len(forget.spec["frames"]) == len(FORGET_BIAS_OPTIONS)
    assert len(temperature.spec["frames"]) == len(TEMPERATURE_OPTIONS)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["flow", "forget", "temperature"])
def test_specs_are_json_and_small(name, request):
    text = json.dumps(request.getfixturevalue(name).spec)
    assert len(text) < 120_000


@pytest.mark.slow
def test_flow_frames_hold_the_measured_norms(flow):
    for nonlinearity in NONLINEARITY_OPTIONS:
        frame = flow.frame(gain=1.1, nonlinearity=nonlinearity)
        norms = jacobian_norms(1.1, nonlinearity)
        assert stats(frame)["norm_50"] == pytest.approx(norms[50].item(), rel=1e-3)  # 4 digits
        measured, reference = frame["norms"]["series"]
        assert measured["y"][25] == pytest.approx(norms[50].item(), rel=1e-3)  # every 2nd step
        assert reference["y"][25] == pytest.approx(1.1**50, rel=1e-3)


@pytest.mark.slow
def test_flow_numbers_move_with_the_gain(flow):
    low = stats(flow.frame(gain=0.5, nonlinearity="linear"))
    one = stats(flow.frame(gain=1.0, nonlinearity="linear"))
    high = stats(flow.frame(gain=2.0, nonlinearity="linear"))
    assert low["norm_100"] < 1e-25 and one["norm_100"] == pytest.approx(1.0) and high["norm_100"] > 1e25
    assert low["factor"] == pytest.approx(0.5, rel=1e-3) and high["factor"] == pytest.approx(2.0, rel=1e-3)


@pytest.mark.slow
def test_forget_frames_increase_with_the_bias(forget):
    values = [stats(forget.frame(forget_bias=b)) for b in FORGET_BIAS_OPTIONS]
    means = [v["forget_mean"] for v in values]
    assert means == sorted(means) and means[0] < 0.2 and means[-1] > 0.98
    assert values[FORGET_BIAS_OPTIONS.index(0.0)]["forget_mean"] == pytest.approx(0.5, abs=0.02)
    reach_25 = [v["lstm_25"] for v in values]
    assert reach_25 == sorted(reach_25)
    assert all(v["rnn_25"] == values[0]["rnn_25"] for v in values)  # the reference does not move


@pytest.mark.slow
def test_temperature_frames(temperature, tiny_lm):
    model, vocab, _ = tiny_lm
    frames = [temperature.frame(temperature=t) for t in TEMPERATURE_OPTIONS]
    entropies = [stats(f)["entropy"] for f in frames]
    assert entropies[0] == 0 and entropies == sorted(entropies)
    greedy = frames[0]["next"]["values"]
    assert greedy[0] == 1.0 and sum(greedy) == 1.0
    # the bars at temperature 1 are the model's own probabilities, largest first
    with torch.no_grad():
        probs = torch.softmax(model(torch.tensor([vocab.encode("the ")]))[0, -1], -1)
    top = probs.sort(descending=True).values[:16]
    assert frames[TEMPERATURE_OPTIONS.index(1.0)]["next"]["values"] == pytest.approx(top.tolist(), rel=1e-3)
    for f in frames:
        assert len(f["samples"]["lines"]) == 3
        assert all(s.startswith("the ") and len(s) <= 44 for s in f["samples"]["lines"])  # <unk> drops


@pytest.mark.slow
def test_the_known_word_share_is_the_capstones_metric(temperature, tiny_lm):
    """One metric for chapters 2 and 10: gpt.known_word_share of the samples after the prompt,
    cased, complete words only (issue 40)."""
    known = set(re.findall(r"[A-Za-z]+", tiny_lm[2]))
    for t in TEMPERATURE_OPTIONS:
        frame = temperature.frame(temperature=t)
        share, _ = known_word_share([s[len("the ") :] for s in frame["samples"]["lines"]], known)
        assert stats(frame)["known_words"] == pytest.approx(share, rel=1e-3)  # 4 digits
    assert known_word_share(["The cat sa"], {"the", "cat", "sa"}) == (0.5, 2)  # cased; "sa" may be cut


@pytest.mark.slow
def test_traits_and_bad_values(flow):
    assert flow.gain == 1.0 and flow.nonlinearity == "tanh"
    with pytest.raises(ValueError, match="gain"):
        GradientFlowExplorer(gain=0.3)
    with pytest.raises(ValueError, match="nonlinearity"):
        GradientFlowExplorer(nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="forget_bias"):
        ForgetBiasExplorer(forget_bias=0.25)
    with pytest.raises(ValueError, match="is not one of"):
        flow.frame(gain=0.33)


@pytest.mark.slow
def test_static_figures(flow, forget, temperature):
    for explorer, selections in [
        (flow, [{"gain": 0.9}, {"gain": 2.0, "nonlinearity": "relu"}]),
        (forget, [{"forget_bias": 0.0}, {"forget_bias": 3.0}]),
        (temperature, [{"temperature": 0.2}, {"temperature": 2.0}]),
    ]:
        fig = explorer.figure(selections)
        assert len(fig.axes) >= 2 * 2
        matplotlib.pyplot.close(fig)


# ---- course_lib.rnn.set_forget_bias (the forget-bias explorer's knob) ----------------------


def test_set_forget_bias_on_cells_and_layers():
    cell = rnn.set_forget_bias(rnn.LSTMCell(2, 3), 2.0)
    assert torch.equal(cell.bias_ih[3:6] + cell.bias_hh[3:6], torch.full((3,), 2.0))
    layer = rnn.set_forget_bias(rnn.LSTM(2, 3, num_layers=2, bidirectional=True), -1.0)
    for name, p in layer.named_parameters():
        if name.startswith("bias_ih"):
            assert torch.equal(p[3:6], torch.full((3,), -1.0))
    with pytest.raises(TypeError, match="LSTM"):
        rnn.set_forget_bias(rnn.GRU(2, 3), 1.0)
    with pytest.raises(ValueError, match="bias=False"):
        rnn.set_forget_bias(rnn.LSTM(2, 3, bias=False), 1.0)
    torch_lstm = rnn.set_forget_bias(torch.nn.LSTM(2, 3), 1.5)  # torch's layers too
    assert torch.equal(torch_lstm.bias_ih_l0[3:6] + torch_lstm.bias_hh_l0[3:6], torch.full((3,), 1.5))


def test_set_update_bias_on_cells_and_layers():
    cell = rnn.set_update_bias(rnn.GRUCell(2, 3), 1.0)
    assert torch.equal(cell.bias_ih[3:6] + cell.bias_hh[3:6], torch.full((3,), 1.0))  # z: rows H..2H
    layer = rnn.set_update_bias(rnn.GRU(2, 3, num_layers=2, bidirectional=True), -1.0)
    for name, p in layer.named_parameters():
        if name.startswith("bias_ih"):
            assert torch.equal(p[3:6], torch.full((3,), -1.0))
    torch_gru = rnn.set_update_bias(torch.nn.GRU(2, 3), 2.0)
    assert torch.equal(torch_gru.bias_ih_l0[3:6] + torch_gru.bias_hh_l0[3:6], torch.full((3,), 2.0))
    with pytest.raises(TypeError, match="GRU"):
        rnn.set_update_bias(rnn.LSTM(2, 3), 1.0)
    with pytest.raises(ValueError, match="bias=False"):
        rnn.set_update_bias(rnn.GRU(2, 3, bias=False), 1.0)
