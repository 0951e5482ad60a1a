"""Explorers of the chapters "Sequences and recurrent networks" and "LSTM and GRU".

    GradientFlowExplorer   recurrent gain and nonlinearity -> ||dh_t/dh_0|| against t (log scale)
    ForgetBiasExplorer     the LSTM's forget-gate bias -> how much gradient reaches k steps back
    TemperatureExplorer    sampling temperature -> next-character distribution and samples

Every frame is computed here, in Python, when the explorer is built, so the
page switches between precomputed frames with no kernel.
"""

from __future__ import annotations

import re

import torch
import traitlets

from .. import charlm, rnn
from .base import Explorer

# ---------------------------------------------------------------------------
# Shared helpers
# ---------------------------------------------------------------------------


def _sig(values, digits=4):
    """Floats rounded to `digits` significant digits (tiny and huge values survive, JSON stays small)."""
    return [float(f"{float(v):.{digits}g}") for v in values]


def _sigstat(name, label, value, digits=3):
    """A stats entry whose value keeps 4 significant digits (tiny gradients must not round to 0)."""
    return {"name": name, "label": label, "value": _sig([value])[0], "digits": digits}


def _geometric_mean(norms, dim=-1):
    """exp(mean(log x)): the typical size of quantities that grow or shrink geometrically."""
    return norms.clamp_min(1e-300).log().mean(dim).exp()


# ---------------------------------------------------------------------------
# Chapter 1: vanishing and exploding gradients in a vanilla RNN
# ---------------------------------------------------------------------------

GAIN_OPTIONS = [0.5, 0.7, 0.8, 0.9, 0.95, 1.0, 1.05, 1.1, 1.2, 1.5, 2.0]
NONLINEARITY_OPTIONS = ["tanh", "linear", "relu"]

_ACTIVATIONS = {
    # name: (act(a), act'(a))
    "tanh": (torch.tanh, lambda a: 1 - torch.tanh(a) ** 2),
    "linear": (lambda a: a, torch.ones_like),
    "relu": (torch.relu, lambda a: (a > 0).to(a.dtype)),
}


def orthogonal_recurrent_weight(hidden_size, gain, seed=0, dtype=torch.float64):
    """W_hh = gain * Q with Q a random orthogonal matrix: every singular value equals `gain`.

    -> (H, H)
    """
    g = torch.Generator().manual_seed(seed)
    q, r = torch.linalg.qr(torch.randn(hidden_size, hidden_size, generator=g, dtype=dtype))
    q = q * torch.sign(torch.diagonal(r))  # a uniformly random orthogonal matrix
    return gain * q


def hidden_jacobians(weight_hh, x_proj, nonlinearity="tanh"):
    """The Jacobians dh_t/dh_0, t = 1..T, of h_t = act(x_proj_t + h_{t-1} W_hh^T), from h_0 = 0.

    The chain rule (backpropagation through time) multiplies one factor per step:

        dh_t/dh_{t-1} = diag(act'(a_t)) W_hh,      a_t = x_proj_t + h_{t-1} W_hh^T
        dh_t/dh_0     = diag(act'(a_t)) W_hh  ...  diag(act'(a_1)) W_hh

    weight_hh: (H, H), x_proj: (B, T, H) the projected inputs  ->  (T, B, H, H)
    """
    if nonlinearity not in _ACTIVATIONS:
        raise ValueError(f"nonlinearity must be one of {sorted(_ACTIVATIONS)}, got {nonlinearity!r}")
    act, act_grad = _ACTIVATIONS[nonlinearity]
    B, T, H = x_proj.shape
    h = x_proj.new_zeros(B, H)  # (B, H)
    jac = torch.eye(H, dtype=x_proj.dtype).expand(B, H, H)  # dh_0/dh_0 = I: (B, H, H)
    jacobians = []
    for t in range(T):
        a = x_proj[:, t] + h @ weight_hh.T  # (B, H)
        h = act(a)
        jac = act_grad(a).unsqueeze(-1) * (weight_hh @ jac)  # diag(act'(a_t)) W_hh (dh_{t-1}/dh_0)
        jacobians.append(jac)
    return torch.stack(jacobians)  # (T, B, H, H)


def jacobian_norms(gain, nonlinearity="tanh", steps=100, hidden_size=32, batch=8,
                   input_scale=0.5, seed=0):
    """||dh_t/dh_0||_2 (spectral norm) for t = 0..steps, W_hh = gain * orthogonal.

    The inputs' projections x_proj_t are random with standard deviation
    `input_scale`. Returns (steps + 1,) float64: the geometric mean over `batch`
    random input sequences (t = 0 gives 1, the identity).
    """
    w = orthogonal_recurrent_weight(hidden_size, gain, seed)
    g = torch.Generator().manual_seed(seed + 1)
    x_proj = input_scale * torch.randn(batch, steps, hidden_size, generator=g, dtype=torch.float64)
    norms = torch.linalg.matrix_norm(hidden_jacobians(w, x_proj, nonlinearity), ord=2)  # (T, B)
    return torch.cat([torch.ones(1, dtype=torch.float64), _geometric_mean(norms)])


def gradient_flow_frame(gain, nonlinearity, steps=100, hidden_size=32, every=2, clip=1e12, seed=0):
    """One frame of the gradient-flow explorer: the measured norms and gain**t, against t."""
    norms = jacobian_norms(gain, nonlinearity, steps, hidden_size, seed=seed)  # (steps + 1,)
    t = torch.arange(steps + 1, dtype=torch.float64)
    shown = slice(0, steps + 1, every)
    reference = gain ** t
    return {
        "norms": {"x": [int(v) for v in t[shown]], "series": [
            {"label": f"{nonlinearity} RNN, measured",
             "y": _sig(norms[shown].clamp(1 / clip, clip))},
            {"label": "gain^t", "y": _sig(reference[shown].clamp(1 / clip, clip))},
        ]},
        "stats": [
            _sigstat("norm_10", "‖∂h_10/∂h_0‖", norms[10], 4),
            _sigstat("norm_50", "‖∂h_50/∂h_0‖", norms[50], 4),
            _sigstat("norm_100", f"‖∂h_{steps}/∂h_0‖", norms[steps], 4),
            _sigstat("factor", "factor per step (geometric mean)", norms[steps] ** (1 / steps), 3),
            _sigstat("gain_power", f"gain^{steps}", gain ** steps, 4),
        ],
    }


class GradientFlowExplorer(Explorer):
    """Pick the recurrent gain and the nonlinearity; watch ||dh_t/dh_0|| vanish or explode.

    Traits set by the controls: ``gain`` (GAIN_OPTIONS) and ``nonlinearity``
    ("tanh", "linear", "relu").
    """

    gain = traitlets.Float(1.0).tag(sync=True)
    nonlinearity = traitlets.Unicode("tanh").tag(sync=True)

    def __init__(self, gain=1.0, nonlinearity="tanh", steps=100, hidden_size=32, seed=0, **kwargs):
        if gain not in GAIN_OPTIONS:
            raise ValueError(f"gain={gain!r} must be one of {GAIN_OPTIONS}")
        if nonlinearity not in NONLINEARITY_OPTIONS:
            raise ValueError(f"nonlinearity={nonlinearity!r} must be one of {NONLINEARITY_OPTIONS}")
        controls = [
            {"name": "gain", "label": "recurrent gain", "kind": "slider", "options": GAIN_OPTIONS},
            {"name": "nonlinearity", "label": "nonlinearity", "kind": "select",
             "options": NONLINEARITY_OPTIONS},
        ]
        panels = [
            {"kind": "lines", "key": "norms", "logy": True, "ymin": 1e-12, "ymax": 1e12,
             "title": "‖∂h_t/∂h_0‖ (log scale, clipped to 1e±12)", "xlabel": "time steps t"},
            {"kind": "stats", "key": "stats", "title": "the numbers (geometric mean over 8 sequences)"},
        ]
        spec = self.build_spec(
            "gradient_flow", "Vanishing and exploding gradients", controls, panels,
            lambda gain, nonlinearity: gradient_flow_frame(gain, nonlinearity, steps, hidden_size,
                                                           seed=seed),
            caption=f"A vanilla RNN with {hidden_size} units, W_hh = gain × a random orthogonal "
                    "matrix, random inputs. Each step multiplies the gradient by diag(act′) W_hh.")
        super().__init__(spec=spec, gain=gain, nonlinearity=nonlinearity, **kwargs)


# ---------------------------------------------------------------------------
# Chapter 2: the forget gate and the cell's additive path
# ---------------------------------------------------------------------------

FORGET_BIAS_OPTIONS = [-2.0, -1.0, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0]


def gradient_reach(kind="lstm", forget_bias=None, steps=100, input_size=32, hidden_size=64,
                   batch=16, seed=0, dtype=torch.float64, direct_only=False):
    """How much gradient reaches k steps back, at initialisation, for k = 0..steps.

    A fresh course_lib cell (torch's initialisation; for the LSTM, forget-gate
    bias `forget_bias` if given) reads `steps` random inputs. Its memory s is
    the cell state c for the LSTM, the hidden state h for the RNN and the GRU.
    With L = u . s_T for a random unit vector u, we backpropagate once and
    measure ||dL/ds_{T-k}|| (1 at k = 0).

    Returns a dict: "reach" (steps + 1,) the geometric mean over the batch,
    and for the LSTM "forget_product" (steps + 1,), ||u * f_T * f_{T-1} * ... * f_{T-k+1}||,
    the gradient along the additive path c_t = f_t * c_{t-1} + ... alone (same mean),
    and "forget_mean", the mean forget gate.

    The cell runs in float64 by default: in float32 the norm of a gradient whose entries are
    all below about 1e-22 reads 0 although the gradient is not 0 (their squares fall below
    float32's smallest number, about 1e-45), and one such row makes the geometric mean 0.
    direct_only=True (LSTM) cuts every path but the additive one: h_{t-1} enters the next
    step's gates detached, so the measured reach is then exactly the forget-gate product.
    """
    cells = {"rnn": rnn.RNNCell, "lstm": rnn.LSTMCell, "gru": rnn.GRUCell}
    if kind not in cells:
        raise ValueError(f"kind must be one of {sorted(cells)}, got {kind!r}")
    if direct_only and kind != "lstm":
        raise ValueError(f"direct_only is for kind='lstm', got kind={kind!r}")
    torch.manual_seed(seed)
    cell = cells[kind](input_size, hidden_size)
    if forget_bias is not None:
        rnn.set_forget_bias(cell, forget_bias)
    cell = cell.to(dtype)
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(steps, batch, input_size, generator=g).to(dtype)  # (T, B, input_size)
    u = torch.nn.functional.normalize(torch.randn(hidden_size, generator=g), dim=0).to(dtype)  # (H,)
    h = torch.zeros(batch, hidden_size, dtype=dtype, requires_grad=kind != "lstm")  # h_0
    c = torch.zeros(batch, hidden_size, dtype=dtype, requires_grad=True)  # c_0 (LSTM)
    memories, log_forget = [c if kind == "lstm" else h], []  # s_0..s_T, and log f_t (LSTM)
    for t in range(steps):  # the cell itself, plus the forget gate read off its parameters
        if kind == "lstm":
            gates = torch.nn.functional.linear(x[t], cell.weight_ih, cell.bias_ih) \
                + torch.nn.functional.linear(h, cell.weight_hh, cell.bias_hh)  # (B, 4H)
            log_forget.append(torch.nn.functional.logsigmoid(gates.chunk(4, -1)[1]).detach())
            h, c = cell(x[t], (h.detach() if direct_only else h, c))
            c.retain_grad()
            memories.append(c)
        else:
            h = cell(x[t], h)
            h.retain_grad()
            memories.append(h)
    (memories[-1] @ u).sum().backward()  # L = u . s_T; each batch row only reaches its own states
    norms = torch.stack([s.grad.norm(dim=-1) for s in reversed(memories)])  # (T + 1, B): k = 0..T
    out = {"reach": _geometric_mean(norms, dim=1)}  # (T + 1,)
    if kind == "lstm":
        logf = torch.stack(log_forget[::-1])  # (T, B, H): log f_T, log f_{T-1}, ...
        prod = torch.cat([logf.new_zeros(1, batch, hidden_size), logf.cumsum(0)]).exp()  # (T+1, B, H)
        out["forget_product"] = _geometric_mean((u * prod).norm(dim=-1), dim=1)  # ||u * f_T * ... ||
        out["forget_mean"] = float(logf.exp().mean())
    return out


def forget_bias_frame(forget_bias, steps=100, rnn_reach=None, every=2, floor=1e-12, seed=0):
    """One frame of the forget-bias explorer."""
    lstm = gradient_reach("lstm", forget_bias, steps, seed=seed)
    rnn_reach = gradient_reach("rnn", steps=steps, seed=seed)["reach"] if rnn_reach is None else rnn_reach
    shown = slice(0, steps + 1, every)
    series = [
        ("LSTM, measured ‖∂c_T/∂c_{T−k}‖", lstm["reach"]),
        ("forget gates alone: Π f", lstm["forget_product"]),
        ("vanilla RNN ‖∂h_T/∂h_{T−k}‖", rnn_reach),
    ]
    return {
        "reach": {"x": list(range(0, steps + 1, every)), "series": [
            {"label": label, "y": _sig(y[shown].clamp_min(floor))} for label, y in series]},
        "stats": [
            _sigstat("forget_mean", "mean forget gate f at initialisation", lstm["forget_mean"], 3),
            _sigstat("lstm_25", "LSTM: gradient 25 steps back", lstm["reach"][25], 4),
            _sigstat("lstm_100", f"LSTM: gradient {steps} steps back", lstm["reach"][steps], 4),
            _sigstat("rnn_25", "RNN: gradient 25 steps back", rnn_reach[25], 4),
        ],
    }


class ForgetBiasExplorer(Explorer):
    """Move the LSTM's initial forget-gate bias; watch how far back the gradient reaches.

    Trait set by the control: ``forget_bias`` (FORGET_BIAS_OPTIONS).
    """

    forget_bias = traitlets.Float(0.0).tag(sync=True)

    def __init__(self, forget_bias=0.0, steps=100, seed=0, **kwargs):
        if forget_bias not in FORGET_BIAS_OPTIONS:
            raise ValueError(f"forget_bias={forget_bias!r} must be one of {FORGET_BIAS_OPTIONS}")
        rnn_reach = gradient_reach("rnn", steps=steps, seed=seed)["reach"]
        controls = [{"name": "forget_bias", "label": "forget-gate bias b_f", "kind": "slider",
                     "options": FORGET_BIAS_OPTIONS}]
        panels = [
            {"kind": "lines", "key": "reach", "logy": True, "ymin": 1e-12, "ymax": 100.0,
             "title": "gradient reaching k steps back (log scale)",
             "xlabel": "steps back k"},
            {"kind": "stats", "key": "stats",
             "title": "at initialisation (geometric mean over 16 sequences)"},
        ]
        spec = self.build_spec(
            "forget_bias", "The forget-gate bias and the cell's memory", controls, panels,
            lambda forget_bias: forget_bias_frame(forget_bias, steps, rnn_reach, seed=seed),
            caption="A fresh LSTM cell and a vanilla RNN cell (64 units, torch's initialisation) "
                    f"read {steps} random inputs; the gradient of u·(memory at T) for a random unit u. "
                    "The product of forget gates is the gradient of the additive path "
                    "c_t = f_t ⊙ c_{t−1} + i_t ⊙ g_t alone; the measured gradient lies above it, "
                    "because paths through h_{t−1} and the gates carry gradient too.")
        super().__init__(spec=spec, forget_bias=forget_bias, **kwargs)


# ---------------------------------------------------------------------------
# Chapter 2: sampling with a temperature
# ---------------------------------------------------------------------------

TEMPERATURE_OPTIONS = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.5, 2.0]


def _entropy_bits(probs):
    return max(0.0, float(-(probs * probs.clamp_min(1e-30).log2()).sum()))  # no -0.0


def _known_word_share(samples, prompt, known_words):
    """Share of the generated words (prompt excluded) found in `known_words`."""
    words = [w for s in samples for w in re.findall(r"[a-z]+", s[len(prompt):].lower())]
    return sum(w in known_words for w in words) / max(len(words), 1)


@torch.no_grad()
def temperature_frame(model, vocab, prompt, temperature, known_words, length=160,
                      num_samples=3, top=16, seed=0):
    """One frame of the temperature explorer: next-character distribution after `prompt`
    at this temperature (the `top` likeliest characters, in the same order at every
    temperature), samples, and numbers that summarise them."""
    was_training = model.training
    model.eval()
    x = torch.tensor([vocab.encode(prompt)])  # (1, P)
    logits = model(x)[0, -1]  # (V,)
    order = logits.argsort(descending=True)[:top]
    if temperature == 0:
        probs = torch.zeros_like(logits)
        probs[logits.argmax()] = 1.0
    else:
        probs = torch.softmax(logits / temperature, dim=-1)  # (V,)
    g = torch.Generator().manual_seed(seed)
    samples = charlm.generate(model, vocab, prompt, length, temperature, num_samples=num_samples,
                              generator=g)
    model.train(was_training)
    shown = [vocab.itos[i] for i in order.tolist()]
    labels = " ".join(f"{c!r}" if c.strip() else repr(c) for c in shown)
    return {
        "next": {"values": _sig(probs[order], 4), "highlight": 0, "labels": shown},
        "samples": {"lines": samples, "note": f"bars, left to right: {labels}"},
        "stats": [
            _sigstat("entropy", "entropy of the next character, bits", _entropy_bits(probs), 3),
            _sigstat("top_prob", "probability of the most likely one", probs.max(), 3),
            _sigstat("known_words", "share of sampled words seen in training",
                  _known_word_share(samples, prompt, known_words), 3),
        ],
    }


class TemperatureExplorer(Explorer):
    """Move the sampling temperature; watch the next-character distribution and the samples.

    Built from a trained character-level model (course_lib.charlm.CharLM) and its
    vocabulary; `train_text` gives the set of known words. Trait set by the
    control: ``temperature`` (TEMPERATURE_OPTIONS; 0 means greedy, the argmax).
    """

    temperature = traitlets.Float(1.0).tag(sync=True)

    def __init__(self, model, vocab, train_text, prompt="The ", temperature=1.0, length=160,
                 num_samples=3, seed=0, **kwargs):
        if temperature not in TEMPERATURE_OPTIONS:
            raise ValueError(f"temperature={temperature!r} must be one of {TEMPERATURE_OPTIONS}")
        known_words = set(re.findall(r"[a-z]+", train_text.lower()))
        labels = ["0 (greedy)"] + [str(t) for t in TEMPERATURE_OPTIONS[1:]]
        controls = [{"name": "temperature", "label": "temperature", "kind": "slider",
                     "options": TEMPERATURE_OPTIONS, "labels": labels}]
        panels = [
            {"kind": "bars", "key": "next", "ymax": 1.0,
             "title": f"next-character probabilities after {prompt!r}",
             "xlabel": "the 16 likeliest characters (the same order at every temperature)"},
            {"kind": "stats", "key": "stats", "title": "the numbers"},
            {"kind": "text", "key": "samples", "title": f"{num_samples} samples"},
        ]
        spec = self.build_spec(
            "temperature", "Sampling with a temperature", controls, panels,
            lambda temperature: temperature_frame(model, vocab, prompt, temperature, known_words,
                                                  length, num_samples, seed=seed),
            caption="p_i ∝ exp(logit_i / temperature). Low temperatures pick the likeliest "
                    "characters (and repeat themselves); high ones flatten the distribution.")
        super().__init__(spec=spec, temperature=temperature, **kwargs)
