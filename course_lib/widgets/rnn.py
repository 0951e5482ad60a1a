"""Explorers of the chapters "Sequences and recurrent networks" and "LSTM and GRU".

    GradientFlowExplorer   recurrent gain and nonlinearity -> ||dh_t/dh_0|| against t (log scale)
    ForgetBiasExplorer     the LSTM's forget-gate bias -> how much gradient reaches k steps back
    TemperatureExplorer    sampling temperature -> next-character distribution and samples

Every frame is computed here, in Python, when the explorer is built, so the
page switches between precomputed frames with no kernel. The measurements the first two draw
(Jacobian norms, gradient reach) are chapter maths and live in ``course_lib.rnn_gradients``;
``hidden_jacobians`` is imported here only so that ``course_lib.widgets`` re-exports it.
"""

from __future__ import annotations

import re

import torch
import traitlets

from .. import charlm
from ..gpt import known_word_share
from ..rnn_gradients import gradient_reach, hidden_jacobians, jacobian_norms  # noqa: F401
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


# ---------------------------------------------------------------------------
# Chapter 1: vanishing and exploding gradients in a vanilla RNN
# ---------------------------------------------------------------------------

GAIN_OPTIONS = [0.5, 0.7, 0.8, 0.9, 0.95, 1.0, 1.05, 1.1, 1.2, 1.5, 2.0]
NONLINEARITY_OPTIONS = ["tanh", "linear", "relu"]


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
    """``gpt.known_word_share`` of the generated text (prompt excluded): the share of its complete
    words found in `known_words` (0 when the samples hold no complete word)."""
    try:
        return known_word_share([s[len(prompt):] for s in samples], known_words)[0]
    except ValueError:  # no complete word (a run of letters followed by a non-letter)
        return 0.0


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
        known_words = set(re.findall(r"[A-Za-z]+", train_text))  # cased, as gpt.known_word_share reads
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
