"""Unit tests of course_lib.rnn: hand-computed steps, what the gates do, layer structure, bad input."""

import math

import pytest
import torch

from course_lib.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell, gru_step, lstm_step, rnn_step

D = torch.float64


def t(x):
    return torch.tensor(x, dtype=D)


def randn(*shape, seed=0):
    return torch.randn(*shape, dtype=D, generator=torch.Generator().manual_seed(seed))


def seeded(cls, *args, seed=0, **kwargs):
    torch.manual_seed(seed)
    return cls(*args, **kwargs).double()


def assert_close(actual, expected, **kw):
    torch.testing.assert_close(actual, torch.as_tensor(expected, dtype=actual.dtype), **kw)


def set_params(module, **values):
    with torch.no_grad():
        for name, value in values.items():
            getattr(module, name).copy_(torch.as_tensor(value, dtype=D))


# ---------------------------------------------------------------------------
# One step, by hand
# ---------------------------------------------------------------------------


def test_rnn_cell_by_hand():
    cell = RNNCell(2, 2).double()
    set_params(
        cell, weight_ih=[[1, 0], [0, 2]], weight_hh=[[0, 1], [1, 0]], bias_ih=[0.1, 0.2], bias_hh=[-0.3, 0.0]
    )
    x, h = t([[1.0, 0.5]]), t([[0.5, -1.0]])
    # W_ih x = [1, 1], W_hh h = [-1, 0.5], b_ih + b_hh = [-0.2, 0.2]
    assert_close(cell(x, h), [[math.tanh(1 - 1 - 0.2), math.tanh(1 + 0.5 + 0.2)]])
    cell.nonlinearity = "relu"
    assert_close(cell(x, h), [[0.0, 1.7]])


def test_lstm_cell_by_hand():
    # one unit (H = 1): W_ih = [w_i, w_f, w_g, w_o] in torch's order i, f, g, o
    cell = LSTMCell(1, 1).double()
    set_params(
        cell,
        weight_ih=[[1.0], [2.0], [3.0], [4.0]],
        weight_hh=[[0.5], [0.0], [-1.0], [1.0]],
        bias_ih=[0.0, 0.0, 0.0, 0.0],
        bias_hh=[0.0, 1.0, 0.0, -1.0],
    )
    x, h, c = 0.5, 0.2, -0.4
    sig = lambda v: 1 / (1 + math.exp(-v))  # noqa: E731
    i = sig(1.0 * x + 0.5 * h)
    f = sig(2.0 * x + 0.0 * h + 1.0)
    g = math.tanh(3.0 * x - 1.0 * h)
    o = sig(4.0 * x + 1.0 * h - 1.0)
    c_new = f * c + i * g
    h_new = o * math.tanh(c_new)
    h_out, c_out = cell(t([[x]]), (t([[h]]), t([[c]])))
    assert_close(h_out, [[h_new]])
    assert_close(c_out, [[c_new]])


def test_gru_cell_by_hand():
    # one unit: W_ih = [w_r, w_z, w_n] in torch's order r, z, n; r multiplies W_hn h + b_hn
    cell = GRUCell(1, 1).double()
    set_params(
        cell,
        weight_ih=[[1.0], [-1.0], [2.0]],
        weight_hh=[[0.5], [1.0], [3.0]],
        bias_ih=[0.0, 0.1, 0.2],
        bias_hh=[0.3, 0.0, -0.5],
    )
    x, h = 0.5, -0.6
    sig = lambda v: 1 / (1 + math.exp(-v))  # noqa: E731
    r = sig(1.0 * x + 0.5 * h + 0.3)
    z = sig(-1.0 * x + 0.1 + 1.0 * h)
    n = math.tanh(2.0 * x + 0.2 + r * (3.0 * h - 0.5))
    assert_close(cell(t([[x]]), t([[h]])), [[(1 - z) * n + z * h]])
    # the paper's other variant, tanh(W_in x + W_hn (r * h) + b), would differ here
    other = math.tanh(2.0 * x + 0.2 + 3.0 * (r * h) - 0.5)
    assert abs((1 - z) * other + z * h - cell(t([[x]]), t([[h]])).item()) > 1e-3


def test_step_functions_take_the_input_projection():
    g = torch.Generator().manual_seed(0)
    x, h, c = (torch.randn(3, 4, generator=g, dtype=D) for _ in range(3))
    for cell, step in [(seeded(RNNCell, 4, 4), rnn_step), (seeded(GRUCell, 4, 4), gru_step)]:
        x_proj = x @ cell.weight_ih.T + cell.bias_ih
        assert_close(step(x_proj, h, cell.weight_hh, cell.bias_hh), cell(x, h))
    cell = seeded(LSTMCell, 4, 4)
    x_proj = x @ cell.weight_ih.T + cell.bias_ih
    for a, b in zip(lstm_step(x_proj, (h, c), cell.weight_hh, cell.bias_hh), cell(x, (h, c))):
        assert_close(a, b)


# ---------------------------------------------------------------------------
# What the gates do
# ---------------------------------------------------------------------------


def lstm_with_gate_biases(i, f, o, H=3, input_size=2, layer=False):
    """An LSTM(Cell) whose gates are pinned open (+50) or shut (-50) by their biases."""
    module = seeded(LSTM, input_size, H) if layer else seeded(LSTMCell, input_size, H)
    suffix = "_l0" if layer else ""
    bias = getattr(module, "bias_ih" + suffix)
    with torch.no_grad():
        bias[0 * H : 1 * H] = i
        bias[1 * H : 2 * H] = f
        bias[3 * H : 4 * H] = o
    return module


def test_lstm_forget_gate_shut_erases_the_memory():
    cell = lstm_with_gate_biases(i=0.0, f=-50.0, o=0.0)  # f ~ 0: c' = i * g, whatever c was
    x, h = randn(4, 2, seed=1), randn(4, 3, seed=2)
    _, c_a = cell(x, (h, randn(4, 3, seed=3) * 10))
    _, c_b = cell(x, (h, torch.zeros(4, 3, dtype=D)))
    assert_close(c_a, c_b, atol=1e-12, rtol=0)


def test_lstm_forget_open_and_input_shut_keeps_the_memory_for_many_steps():
    lstm = lstm_with_gate_biases(i=-50.0, f=50.0, o=0.0, layer=True)  # c_t = c_{t-1}
    x = randn(2, 30, 2, seed=4)
    c0 = randn(1, 2, 3, seed=5)
    _, (_, c_n) = lstm(x, (torch.zeros(1, 2, 3, dtype=D), c0))
    assert_close(c_n, c0, atol=1e-12, rtol=0)
    # the control: with the forget gate shut, the memory is gone
    lstm = lstm_with_gate_biases(i=-50.0, f=-50.0, o=0.0, layer=True)
    _, (_, c_n) = lstm(x, (torch.zeros(1, 2, 3, dtype=D), c0))
    assert_close(c_n, torch.zeros_like(c0), atol=1e-12, rtol=0)


def test_lstm_output_gate_shut_hides_the_memory():
    cell = lstm_with_gate_biases(i=0.0, f=0.0, o=-50.0)  # o ~ 0: h' = 0 although c' != 0
    h, c = cell(randn(4, 2, seed=6), (randn(4, 3, seed=7), randn(4, 3, seed=8)))
    assert_close(h, torch.zeros(4, 3), atol=1e-12, rtol=0)
    assert c.abs().min() > 1e-3


def test_gru_update_gate_open_copies_the_state():
    cell = seeded(GRUCell, 2, 3)
    with torch.no_grad():
        cell.bias_ih[3:6] = 50.0  # z ~ 1: h' = h
    h = randn(4, 3, seed=9)
    assert_close(cell(randn(4, 2, seed=10), h), h, atol=1e-12, rtol=0)


def test_gru_reset_gate_shut_ignores_the_state_in_the_candidate():
    cell = seeded(GRUCell, 2, 3)
    with torch.no_grad():
        cell.bias_ih[0:3] = -50.0  # r ~ 0: n = tanh(W_in x + b_in)
        cell.bias_ih[3:6] = -50.0  # z ~ 0: h' = n
    x = randn(4, 2, seed=11)
    expected = torch.tanh(x @ cell.weight_ih[6:].T + cell.bias_ih[6:])
    assert_close(cell(x, randn(4, 3, seed=12) * 5), expected, atol=1e-12, rtol=0)


def test_relu_rnn_is_non_negative_and_tanh_rnn_is_bounded():
    x = randn(3, 7, 4, seed=13) * 10
    out, h_n = seeded(RNN, 4, 5, nonlinearity="relu")(x)
    assert (out >= 0).all() and (h_n >= 0).all() and (out > 0).any()
    out, _ = seeded(RNN, 4, 5)(x)
    assert (out.abs() < 1).all()


# ---------------------------------------------------------------------------
# Cells: hx=None; inputs need a batch dimension
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [RNNCell, GRUCell])
def test_cell_without_hx_starts_from_zeros(cls):
    cell, x = seeded(cls, 4, 3), randn(2, 4)
    assert_close(cell(x), cell(x, torch.zeros(2, 3, dtype=D)))


def test_lstm_cell_without_hx_starts_from_zeros():
    cell, x = seeded(LSTMCell, 4, 3), randn(2, 4)
    zeros = torch.zeros(2, 3, dtype=D)
    for a, b in zip(cell(x), cell(x, (zeros, zeros))):
        assert_close(a, b)


@pytest.mark.parametrize("cls", [RNNCell, GRUCell, LSTMCell, RNN, GRU, LSTM])
def test_unbatched_input_is_refused_with_a_hint(cls):
    """The book always passes batches; torch's unbatched layout is refused, with the fix."""
    module = seeded(cls, 4, 3)
    x = randn(4) if "Cell" in cls.__name__ else randn(5, 4)
    with pytest.raises(ValueError, match=r"inputs need a batch dimension \(x\[None\] adds one\)"):
        module(x)


# ---------------------------------------------------------------------------
# Layers: the time loop, directions, stacking, layouts
# ---------------------------------------------------------------------------


def copy_direction(layer, cell, suffix):
    """Load the weights of one (layer, direction) of `layer` into `cell`."""
    cell.load_state_dict({name: getattr(layer, f"{name}{suffix}") for name in cell.state_dict()})


@pytest.mark.parametrize("layer_cls, cell_cls", [(RNN, RNNCell), (LSTM, LSTMCell), (GRU, GRUCell)])
def test_layer_is_the_cell_looped_over_time(layer_cls, cell_cls):
    layer, cell = seeded(layer_cls, 4, 3), seeded(cell_cls, 4, 3, seed=1)
    copy_direction(layer, cell, "_l0")
    x = randn(2, 5, 4)
    output, final = layer(x)
    state = None
    for step in range(5):
        state = cell(x[:, step], state)
        h = state[0] if isinstance(state, tuple) else state
        assert_close(output[:, step], h)
    if layer_cls is LSTM:
        assert_close(final[0], state[0][None]), assert_close(final[1], state[1][None])
    else:
        assert_close(final, state[None])


@pytest.mark.parametrize("cls", [RNN, LSTM, GRU])
def test_reverse_direction_reads_the_sequence_backwards(cls):
    bi = seeded(cls, 4, 3, bidirectional=True)
    fwd, bwd = seeded(cls, 4, 3, seed=1), seeded(cls, 4, 3, seed=2)
    fwd.load_state_dict({k: v for k, v in bi.state_dict().items() if not k.endswith("_reverse")})
    bwd.load_state_dict(
        {k.removesuffix("_reverse"): v for k, v in bi.state_dict().items() if k.endswith("_reverse")}
    )
    x = randn(2, 6, 4)
    output, final = bi(x)
    out_f, final_f = fwd(x)
    out_b, final_b = bwd(x.flip(1))  # the backward direction = forward on the reversed sequence
    assert output.shape == (2, 6, 6)
    assert_close(output[..., :3], out_f)
    assert_close(output[..., 3:], out_b.flip(1))  # h^backward_t sits at position t
    finals = zip(final, final_f, final_b) if cls is LSTM else [(final, final_f, final_b)]
    for both, f, b in finals:
        assert both.shape == (2, 2, 3)
        assert_close(both[0], f[0]), assert_close(both[1], b[0])


@pytest.mark.parametrize("cls", [RNN, LSTM, GRU])
def test_layers_are_stacked(cls):
    deep = seeded(cls, 4, 3, num_layers=2, bidirectional=True)
    first = seeded(cls, 4, 3, bidirectional=True, seed=1)
    second = seeded(cls, 6, 3, bidirectional=True, seed=2)
    sd = deep.state_dict()
    first.load_state_dict({k: v for k, v in sd.items() if "_l0" in k})
    second.load_state_dict({k.replace("_l1", "_l0"): v for k, v in sd.items() if "_l1" in k})
    x = randn(2, 5, 4)
    out, final = deep(x)
    mid, final_1 = first(x)
    out_2, final_2 = second(mid)  # layer 2 reads layer 1's (B, T, 2H) output
    assert_close(out, out_2)
    for both, a, b in zip(final, final_1, final_2) if cls is LSTM else [(final, final_1, final_2)]:
        assert both.shape == (4, 2, 3)  # rows: l0 fwd, l0 bwd, l1 fwd, l1 bwd
        assert_close(both, torch.cat([a, b]))


@pytest.mark.parametrize("cls", [RNN, LSTM, GRU])
def test_layer_without_hx_starts_from_zeros(cls):
    layer, x = seeded(cls, 4, 3, num_layers=2, bidirectional=True), randn(2, 5, 4)
    zeros = torch.zeros(4, 2, 3, dtype=D)
    a, b = layer(x), layer(x, (zeros, zeros) if cls is LSTM else zeros)
    assert_close(a[0], b[0])
    if cls is LSTM:
        assert_close(a[1][0], b[1][0]), assert_close(a[1][1], b[1][1])
    else:
        assert_close(a[1], b[1])


@pytest.mark.parametrize("cls", [RNN, LSTM, GRU])
def test_batch_first_false_is_the_transposed_layout(cls):
    bf, tf = seeded(cls, 4, 3, num_layers=2), seeded(cls, 4, 3, num_layers=2, batch_first=False)
    tf.load_state_dict(bf.state_dict())
    x = randn(2, 5, 4)
    (out_bf, final_bf), (out_tf, final_tf) = bf(x), tf(x.transpose(0, 1))
    assert out_tf.shape == (5, 2, 3)
    assert_close(out_tf, out_bf.transpose(0, 1))
    for a, b in zip(final_bf if cls is LSTM else [final_bf], final_tf if cls is LSTM else [final_tf]):
        assert a.shape == (2, 2, 3)
        assert_close(a, b)


@pytest.mark.parametrize("cls", [RNN, LSTM, GRU])
def test_batch_elements_are_independent(cls):
    layer, x = seeded(cls, 4, 3, bidirectional=True), randn(3, 5, 4)
    out, _ = layer(x)
    for b in range(3):
        alone, _ = layer(x[b : b + 1])  # a batch of one
        assert alone.shape == (1, 5, 6)
        assert_close(alone[0], out[b])


def test_bool_arguments_are_type_checked_as_torch_does():
    """torch.nn.RNN raises TypeError for bias=1 or batch_first="False" (a str is truthy)."""
    with pytest.raises(TypeError, match="bias should be of type bool, got: int"):
        LSTM(3, 4, bias=1)
    with pytest.raises(TypeError, match="batch_first should be of type bool, got: str"):
        GRU(3, 4, batch_first="False")
    with pytest.raises(TypeError, match="bidirectional should be of type bool, got: int"):
        RNN(3, 4, bidirectional=1)
    with pytest.raises(TypeError, match="bias should be of type bool, got: int"):
        GRUCell(3, 4, bias=0)
    for cls in (RNN, LSTM, GRU):  # torch agrees on the first two
        with pytest.raises(TypeError, match="bias should be of type bool"):
            getattr(torch.nn, cls.__name__)(3, 4, bias=1)
        with pytest.raises(TypeError, match="batch_first should be of type bool"):
            getattr(torch.nn, cls.__name__)(3, 4, batch_first="False")


@pytest.mark.parametrize("cls", [RNNCell, LSTMCell, GRUCell, RNN, LSTM, GRU])
def test_init_is_uniform_within_one_over_sqrt_hidden(cls):
    torch.manual_seed(0)
    module = cls(10, 16)
    bound = 1 / math.sqrt(16)
    values = torch.cat([p.detach().flatten() for p in module.parameters()])
    assert values.abs().max() <= bound
    assert values.min() < -0.9 * bound and values.max() > 0.9 * bound  # spread over the range
    assert abs(values.mean()) < 0.02


def test_repr_lists_the_non_default_options():
    assert (
        repr(LSTM(5, 7, num_layers=2, bidirectional=True)) == "LSTM(5, 7, num_layers=2, bidirectional=True)"
    )
    assert repr(RNN(5, 7, nonlinearity="relu", bias=False)) == "RNN(5, 7, nonlinearity='relu', bias=False)"
    assert repr(GRU(5, 7, batch_first=False)) == "GRU(5, 7, batch_first=False)"
    assert repr(LSTMCell(5, 7)) == "LSTMCell(5, 7)"


# ---------------------------------------------------------------------------
# Dropout between layers (training mode only)
# ---------------------------------------------------------------------------


def test_dropout_acts_between_layers_in_training_only():
    lstm = seeded(LSTM, 4, 3, num_layers=2, dropout=0.5)
    x = randn(2, 5, 4)
    lstm.eval()
    out_eval, (h_eval, c_eval) = lstm(x)
    assert_close(lstm(x)[0], out_eval)  # eval: deterministic
    lstm.train()
    torch.manual_seed(0)
    out_train, (h_train, c_train) = lstm(x)
    assert not torch.allclose(out_train, out_eval)
    assert_close(h_train[0], h_eval[0])  # the first layer never sees dropout
    assert_close(c_train[0], c_eval[0])


def test_dropout_one_feeds_zeros_to_the_next_layer():
    deep = seeded(GRU, 4, 3, num_layers=2, dropout=1.0).train()
    top = seeded(GRU, 3, 3, seed=1)
    top.load_state_dict({k.replace("_l1", "_l0"): v for k, v in deep.state_dict().items() if "_l1" in k})
    x = randn(2, 5, 4)
    out, _ = deep(x)
    assert_close(out, top(torch.zeros(2, 5, 3, dtype=D))[0])


def test_dropout_with_one_layer_warns_like_torch():
    with pytest.warns(UserWarning, match="dropout=0.3 has no effect with num_layers=1"):
        LSTM(4, 3, dropout=0.3)


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [RNNCell, LSTMCell, GRUCell, RNN, LSTM, GRU])
def test_bad_sizes(cls):
    with pytest.raises(ValueError, match="hidden_size must be a positive int, got 0"):
        cls(3, 0)
    with pytest.raises(TypeError, match="input_size must be an int, got float"):
        cls(3.0, 4)


def test_unknown_nonlinearity():
    with pytest.raises(ValueError, match="nonlinearity must be 'tanh' or 'relu', got 'sigmoid'"):
        RNNCell(3, 4, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="nonlinearity must be 'tanh' or 'relu', got 'Tanh'"):
        RNN(3, 4, nonlinearity="Tanh")


def test_bad_layer_options():
    with pytest.raises(ValueError, match="num_layers must be a positive int, got 0"):
        LSTM(3, 4, num_layers=0)
    with pytest.raises(ValueError, match="dropout must be a probability between 0 and 1, got 1.5"):
        GRU(3, 4, num_layers=2, dropout=1.5)


@pytest.mark.parametrize("cls", [RNN, LSTM, GRU])
def test_layer_input_with_wrong_features(cls):
    layer = cls(5, 4)
    name = cls.__name__
    with pytest.raises(
        ValueError,
        match=rf"x has 7 features but the {name} was built with input_size=5 "
        r"\(x has shape \(2, 3, 7\)",
    ):
        layer(torch.zeros(2, 3, 7))


def test_layer_input_with_wrong_dims():
    with pytest.raises(
        ValueError,
        match=r"x must have shape \(B, T, input_size\) \(batch_first=True\), "
        r"got shape \(5,\)",
    ):
        LSTM(5, 4)(torch.zeros(5))
    with pytest.raises(
        ValueError, match=r"\(T, B, input_size\) \(batch_first=False\).*got shape \(1, 2, 3, 5\)"
    ):
        GRU(5, 4, batch_first=False)(torch.zeros(1, 2, 3, 5))


def test_layer_input_without_time_steps():
    with pytest.raises(ValueError, match=r"x of shape \(2, 0, 5\) has no time steps"):
        RNN(5, 4)(torch.zeros(2, 0, 5))
    with pytest.raises(ValueError, match=r"x of shape \(0, 2, 5\) has no time steps"):
        RNN(5, 4, batch_first=False)(torch.zeros(0, 2, 5))


def test_input_type_and_dtype():
    with pytest.raises(TypeError, match="x must be a torch.Tensor, got list"):
        GRUCell(2, 3)([[1.0, 2.0]])
    with pytest.raises(TypeError, match="x must be a floating-point tensor, got dtype torch.int64"):
        LSTM(2, 3)(torch.zeros(1, 4, 2, dtype=torch.long))
    with pytest.raises(
        TypeError, match=r"x has dtype torch.float64 but the LSTM's parameters are torch.float32"
    ):
        LSTM(2, 3)(torch.zeros(1, 4, 2, dtype=D))


@pytest.mark.parametrize("cls", [RNN, GRU])
def test_layer_hx_with_wrong_shape(cls):
    layer = cls(5, 4, num_layers=2, bidirectional=True)
    x = torch.zeros(3, 6, 5)
    with pytest.raises(
        ValueError,
        match=r"hx has shape \(2, 3, 4\) but the .* expects "
        r"\(num_layers \* num_directions, B, hidden_size\) = \(4, 3, 4\)",
    ):
        layer(x, torch.zeros(2, 3, 4))
    with pytest.raises(ValueError, match=r"hx has shape \(4, 2, 4\) .* = \(4, 3, 4\)"):
        layer(x, torch.zeros(4, 2, 4))  # wrong batch size
    with pytest.raises(TypeError, match="hx must be a torch.Tensor, got tuple"):
        layer(x, (torch.zeros(4, 3, 4), torch.zeros(4, 3, 4)))


def test_lstm_hx_must_be_a_pair_of_the_right_shapes():
    lstm = LSTM(5, 4)
    x = torch.zeros(3, 6, 5)
    with pytest.raises(TypeError, match=r"hx must be a tuple \(h, c\) for the LSTM, got Tensor"):
        lstm(x, torch.zeros(1, 3, 4))
    with pytest.raises(TypeError, match=r"hx must be a tuple \(h, c\) for the LSTM, got a tuple of 3"):
        lstm(x, (torch.zeros(1, 3, 4),) * 3)
    with pytest.raises(ValueError, match=r"hx\[1\] \(c_0\) has shape \(1, 3, 5\) .* = \(1, 3, 4\)"):
        lstm(x, (torch.zeros(1, 3, 4), torch.zeros(1, 3, 5)))


def test_cell_bad_input():
    with pytest.raises(ValueError, match=r"x has 7 features but the LSTMCell was built with input_size=5"):
        LSTMCell(5, 4)(torch.zeros(2, 7))
    with pytest.raises(ValueError, match=r"x must have shape \(B, input_size\), got shape \(2, 3, 5\)"):
        RNNCell(5, 4)(torch.zeros(2, 3, 5))
    with pytest.raises(
        ValueError,
        match=r"hx has shape \(3, 4\) but the GRUCell expects "
        r"\(B, hidden_size\) = \(2, 4\)",
    ):
        GRUCell(5, 4)(torch.zeros(2, 5), torch.zeros(3, 4))
    with pytest.raises(ValueError, match=r"hx\[1\] \(c\) has shape \(2, 3\) .* = \(2, 4\)"):
        LSTMCell(5, 4)(torch.zeros(2, 5), (torch.zeros(2, 4), torch.zeros(2, 3)))
    with pytest.raises(TypeError, match=r"hx must be a tuple \(h, c\) for the LSTMCell, got Tensor"):
        LSTMCell(5, 4)(torch.zeros(2, 5), torch.zeros(2, 4))
