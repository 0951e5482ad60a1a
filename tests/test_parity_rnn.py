"""Parity of course_lib.rnn with torch.nn: state dicts, outputs, final states and gradients.

Every case builds torch's module, loads its state dict into ours, runs both on the
same random input (and initial state), and compares the outputs, the final
states and the gradients of a random linear function of them w.r.t. the input,
the initial state and every parameter. Shapes are random, seeded by the case's name.
"""

import itertools
import zlib

import pytest
import torch

from course_lib import rnn

TOLERANCE = {torch.float64: dict(rtol=1e-10, atol=1e-10), torch.float32: dict(rtol=1e-5, atol=1e-5)}
DTYPES = pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])

# (name, torch class, our class, extra constructor kwargs)
CELLS = {
    "RNNCell-tanh": (torch.nn.RNNCell, rnn.RNNCell, dict(nonlinearity="tanh")),
    "RNNCell-relu": (torch.nn.RNNCell, rnn.RNNCell, dict(nonlinearity="relu")),
    "LSTMCell": (torch.nn.LSTMCell, rnn.LSTMCell, {}),
    "GRUCell": (torch.nn.GRUCell, rnn.GRUCell, {}),
}
LAYERS = {
    "RNN-tanh": (torch.nn.RNN, rnn.RNN, dict(nonlinearity="tanh")),
    "RNN-relu": (torch.nn.RNN, rnn.RNN, dict(nonlinearity="relu")),
    "LSTM": (torch.nn.LSTM, rnn.LSTM, {}),
    "GRU": (torch.nn.GRU, rnn.GRU, {}),
}


def generator(*case):
    return torch.Generator().manual_seed(zlib.crc32(repr(case).encode()))


def randn(g, shape, dtype):
    return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype).requires_grad_()


def make_pair(table, kind, dtype, g, **kwargs):
    """torch's module and ours, ours loaded from torch's state dict."""
    theirs_cls, ours_cls, extra = table[kind]
    torch.manual_seed(int(torch.randint(0, 2**31, (1,), generator=g)))  # torch's own init
    theirs = theirs_cls(**kwargs, **extra).to(dtype)
    ours = ours_cls(**kwargs, **extra).to(dtype)
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


def flatten(out):
    """(output, h_n) / (output, (h_n, c_n)) / h / (h, c) -> a flat list of tensors."""
    if isinstance(out, torch.Tensor):
        return [out]
    return [t for part in out for t in flatten(part)]


def assert_same_results(ours, theirs, out_ours, out_theirs, inputs, dtype, g):
    """Same outputs and states, and the same gradients w.r.t. `inputs` and every parameter."""
    tol = TOLERANCE[dtype]
    out_ours, out_theirs = flatten(out_ours), flatten(out_theirs)
    assert [o.shape for o in out_ours] == [o.shape for o in out_theirs]
    for a, b in zip(out_ours, out_theirs):
        torch.testing.assert_close(a, b, **tol)

    upstream = [torch.randn(o.shape, generator=g, dtype=torch.float64).to(dtype) for o in out_ours]
    names = [name for name, _ in theirs.named_parameters()]
    assert names == [name for name, _ in ours.named_parameters()]
    grads_ours = torch.autograd.grad(out_ours, [*inputs, *ours.parameters()], upstream)
    grads_theirs = torch.autograd.grad(out_theirs, [*inputs, *theirs.parameters()], upstream)
    labels = [f"input {i}" for i in range(len(inputs))] + names
    for label, a, b in zip(labels, grads_ours, grads_theirs):
        torch.testing.assert_close(a, b, **tol, msg=lambda m, label=label: f"grad w.r.t. {label}: {m}")


# ---------------------------------------------------------------------------
# Cells
# ---------------------------------------------------------------------------


@DTYPES
@pytest.mark.parametrize("with_hx", [True, False], ids=["hx", "no_hx"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("kind", CELLS)
def test_cell_matches_torch(kind, bias, with_hx, dtype):
    g = generator(kind, bias, with_hx, True, dtype)
    B, input_size, H = (int(n) for n in torch.randint(1, 7, (3,), generator=g))
    ours, theirs = make_pair(CELLS, kind, dtype, g, input_size=input_size, hidden_size=H, bias=bias)
    x = randn(g, (B, input_size), dtype)
    inputs = [x]
    hx = None
    if with_hx:
        hx = randn(g, (B, H), dtype)
        if kind == "LSTMCell":
            hx = (hx, randn(g, (B, H), dtype))
        inputs += flatten(hx)
    assert_same_results(ours, theirs, ours(x, hx), theirs(x, hx), inputs, dtype, g)


# ---------------------------------------------------------------------------
# Layers
# ---------------------------------------------------------------------------


@DTYPES
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("batch_first", [True, False], ids=["batch_first", "time_first"])
@pytest.mark.parametrize("with_hx", [True, False], ids=["hx", "no_hx"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("num_layers", [1, 2, 3], ids=lambda n: f"L{n}")
@pytest.mark.parametrize("kind", LAYERS)
def test_layer_matches_torch(kind, num_layers, bidirectional, with_hx, batch_first, bias, dtype):
    g = generator(kind, num_layers, bidirectional, with_hx, batch_first, bias, dtype)
    B, T, input_size, H = (int(n) for n in torch.randint(1, 6, (4,), generator=g))
    ours, theirs = make_pair(
        LAYERS,
        kind,
        dtype,
        g,
        input_size=input_size,
        hidden_size=H,
        num_layers=num_layers,
        bias=bias,
        batch_first=batch_first,
        bidirectional=bidirectional,
    )
    x = randn(g, (B, T, input_size) if batch_first else (T, B, input_size), dtype)
    inputs, hx = [x], None
    if with_hx:
        state_shape = (num_layers * (2 if bidirectional else 1), B, H)
        hx = randn(g, state_shape, dtype)
        if kind == "LSTM":
            hx = (hx, randn(g, state_shape, dtype))
        inputs += flatten(hx)
    assert_same_results(ours, theirs, ours(x, hx), theirs(x, hx), inputs, dtype, g)


@pytest.mark.parametrize("kind", LAYERS)
def test_default_batch_first_is_torchs_batch_first_true(kind):
    g = generator("default", kind)
    theirs_cls, ours_cls, extra = LAYERS[kind]
    theirs = theirs_cls(4, 3, batch_first=True, **extra).double()
    ours = ours_cls(4, 3, **extra).double()  # batch_first not given: True
    assert ours.batch_first is True
    ours.load_state_dict(theirs.state_dict())
    x = randn(g, (2, 5, 4), torch.float64)
    assert_same_results(ours, theirs, ours(x), theirs(x), [x], torch.float64, g)


@pytest.mark.parametrize("kind", LAYERS)
def test_eval_mode_with_dropout_matches_torch(kind):
    g = generator("dropout", kind)
    ours, theirs = make_pair(
        LAYERS,
        kind,
        torch.float64,
        g,
        input_size=3,
        hidden_size=4,
        num_layers=3,
        dropout=0.5,
        batch_first=True,
    )
    ours.eval(), theirs.eval()
    x = randn(g, (2, 5, 3), torch.float64)
    assert_same_results(ours, theirs, ours(x), theirs(x), [x], torch.float64, g)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_lstm_matches_torch_at_a_realistic_size(dtype):
    g = generator("realistic", dtype)
    ours, theirs = make_pair(
        LAYERS,
        "LSTM",
        dtype,
        g,
        input_size=32,
        hidden_size=64,
        num_layers=2,
        bidirectional=True,
        batch_first=True,
    )
    x = randn(g, (8, 40, 32), dtype)
    hx = (randn(g, (4, 8, 64), dtype), randn(g, (4, 8, 64), dtype))
    assert_same_results(ours, theirs, ours(x, hx), theirs(x, hx), [x, *hx], dtype, g)


# ---------------------------------------------------------------------------
# State dicts: the same keys, in the same order, with the same shapes, both ways
# ---------------------------------------------------------------------------


def layer_configs():
    return [
        pytest.param(
            kind,
            num_layers,
            bidirectional,
            bias,
            id=f"{kind}-L{num_layers}-{'bi' if bidirectional else 'uni'}-{'bias' if bias else 'no_bias'}",
        )
        for kind, num_layers, bidirectional, bias in itertools.product(
            LAYERS, [1, 2, 3], [False, True], [True, False]
        )
    ]


def assert_same_layout(ours, theirs):
    ours_sd, theirs_sd = ours.state_dict(), theirs.state_dict()
    assert list(ours_sd) == list(theirs_sd)
    assert [v.shape for v in ours_sd.values()] == [v.shape for v in theirs_sd.values()]


@pytest.mark.parametrize("kind, num_layers, bidirectional, bias", layer_configs())
def test_layer_state_dict_layout_and_loading_both_ways(kind, num_layers, bidirectional, bias):
    theirs_cls, ours_cls, extra = LAYERS[kind]
    kwargs = dict(
        input_size=3,
        hidden_size=5,
        num_layers=num_layers,
        bidirectional=bidirectional,
        bias=bias,
        batch_first=True,
        **extra,
    )
    theirs, ours = theirs_cls(**kwargs).double(), ours_cls(**kwargs).double()
    assert_same_layout(ours, theirs)

    theirs.load_state_dict(ours.state_dict())  # ours -> torch, strict
    x = torch.randn(2, 4, 3, dtype=torch.float64)
    for a, b in zip(flatten(ours(x)), flatten(theirs(x))):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("kind", CELLS)
def test_cell_state_dict_layout_and_loading_both_ways(kind, bias):
    theirs_cls, ours_cls, extra = CELLS[kind]
    theirs, ours = theirs_cls(3, 5, bias=bias, **extra).double(), ours_cls(3, 5, bias=bias, **extra).double()
    assert_same_layout(ours, theirs)
    assert (ours.bias_ih is None) == (not bias) and (ours.bias_hh is None) == (not bias)

    theirs.load_state_dict(ours.state_dict())  # ours -> torch, strict
    x = torch.randn(2, 3, dtype=torch.float64)
    for a, b in zip(flatten(ours(x)), flatten(theirs(x))):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
