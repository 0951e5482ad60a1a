"""Explorers of the chapters "Sequence to sequence" and "Attention in seq2seq".

ScoreExplorer      every score function on toy 2-D vectors: move the query, watch the weights
AlignmentExplorer  score function x held-out example -> the trained model's alignment heatmap
"""

from __future__ import annotations

import math

import torch
import traitlets

from .. import attention
from .base import Explorer, _round, _stat

# ---------------------------------------------------------------------------
# Score functions on toy vectors
# ---------------------------------------------------------------------------

TOY_SCORES = ["dot", "scaled_dot", "cosine", "general", "concat", "location"]
TOY_ANGLES = list(range(0, 360, 30))  # the query's direction, degrees
TOY_LENGTHS = [0.5, 1.0, 2.0, 4.0]  # the query's length

# Five keys in the plane: three directions, two of them at two lengths.
TOY_KEYS = torch.tensor([[1.0, 0.0], [3.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -2.0]],
                        dtype=torch.float64)
TOY_KEY_LABELS = ["k0 → (1,0)", "k1 → (3,0)", "k2 ↑ (0,1)", "k3 ← (−1,0)", "k4 ↓ (0,−2)"]


def toy_score_modules(seed=0):
    """The parameterised scores with fixed random weights (d = 2, hidden 4, 5 positions)."""
    torch.manual_seed(seed)
    modules = {"general": attention.GeneralScore(2, 2), "concat": attention.AdditiveScore(2, 2, 4),
               "location": attention.LocationScore(2, len(TOY_KEYS))}
    with torch.no_grad():  # larger weights than the default init, so the differences show
        for module in modules.values():
            for p in module.parameters():
                p.mul_(3.0)
    return {name: m.double() for name, m in modules.items()}


def toy_scores(score, q, k, modules):
    """Scores (T_k,) of one query q (2,) against the keys k (T_k, 2) with course_lib.attention."""
    q = q[None]  # (1, 2)
    if score == "dot":
        s = attention.dot_score(q, k)
    elif score == "scaled_dot":
        s = attention.scaled_dot_score(q, k)
    elif score == "cosine":
        s = attention.cosine_score(q, k, scale=3.0)
    else:
        with torch.no_grad():
            s = modules[score](q, k)
    return s[0]  # (T_k,)


def toy_score_frame(score, angle, length, modules):
    theta = math.radians(angle)
    q = length * torch.tensor([math.cos(theta), math.sin(theta)], dtype=torch.float64)
    s = toy_scores(score, q, TOY_KEYS, modules)  # (T_k,)
    w = torch.softmax(s, -1)
    entropy = -(w * w.clamp_min(1e-300).log()).sum()
    keys = [f"k{j}" for j in range(len(s))]
    return {
        "scores": {"values": _round(s), "labels": keys},
        "weights": {"values": _round(w), "highlight": int(w.argmax()), "labels": keys},
        "stats": [
            _stat("argmax_key", "key with the largest weight", int(w.argmax()), 0),
            _stat("max_weight", "largest weight", w.max(), 3),
            _stat("entropy", f"entropy, nats (uniform: {math.log(len(w)):.2f})", entropy, 3),
            _stat("score_range", "max score − min score", s.max() - s.min(), 2),
        ],
    }


class ScoreExplorer(Explorer):
    """Pick a score function and move a query around five fixed keys in the plane.

    Traits: ``score`` (one of TOY_SCORES), ``angle`` (degrees), ``length`` (the query's norm).
    The keys: (1,0), (3,0), (0,1), (−1,0), (0,−2). Parameterised scores (general, concat,
    location) use fixed random weights.
    """

    score = traitlets.Unicode("dot").tag(sync=True)
    angle = traitlets.Int(0).tag(sync=True)
    length = traitlets.Float(1.0).tag(sync=True)

    def __init__(self, score="dot", angle=0, length=1.0, seed=0, **kwargs):
        if score not in TOY_SCORES:
            raise ValueError(f"score={score!r} must be one of {TOY_SCORES}")
        if angle not in TOY_ANGLES:
            raise ValueError(f"angle={angle!r} must be one of {TOY_ANGLES}")
        if length not in TOY_LENGTHS:
            raise ValueError(f"length={length!r} must be one of {TOY_LENGTHS}")
        modules = toy_score_modules(seed)
        controls = [
            {"name": "score", "label": "score", "kind": "select", "options": TOY_SCORES,
             "labels": ["dot q·k", "scaled dot q·k/√d", "cosine (×3)", "general qᵀWk",
                        "concat vᵀtanh(W[q;k])", "location Wq"]},
            {"name": "angle", "label": "query angle (°)", "kind": "slider", "options": TOY_ANGLES},
            {"name": "length", "label": "query length", "kind": "slider", "options": TOY_LENGTHS},
        ]
        panels = [
            {"kind": "bars", "key": "scores", "title": "scores of the 5 keys (may be negative)",
             "xlabel": "key"},
            {"kind": "bars", "key": "weights", "title": "softmax weights", "xlabel": "key",
             "ymax": 1.0},
            {"kind": "stats", "key": "stats", "title": "the numbers"},
        ]
        spec = self.build_spec(
            "scores", "One query, five keys, six score functions", controls, panels,
            lambda score, angle, length: toy_score_frame(score, angle, length, modules),
            caption="Keys: " + ", ".join(TOY_KEY_LABELS) + ". The query points at the angle "
                    "chosen (0° = right, 90° = up) with the length chosen.")
        super().__init__(spec=spec, score=score, angle=angle, length=float(length), **kwargs)


# ---------------------------------------------------------------------------
# Alignments of trained models
# ---------------------------------------------------------------------------

def alignment_frame(source, prediction, target, weights, model_exact_match):
    """One frame: the heatmap of weights (T_out, S) with the characters as labels."""
    w = torch.as_tensor(weights, dtype=torch.float64)
    rows = list(prediction) + ["<eos>"]
    if w.shape != (len(rows), len(source)):
        raise ValueError(f"weights must have shape (len(prediction) + 1, len(source)) = "
                         f"({len(rows)}, {len(source)}), got {tuple(w.shape)}")
    entropy = -(w * w.clamp_min(1e-300).log()).sum(-1).mean()
    return {
        "alignment": {"matrix": [_round(row, 3) for row in w], "rows": rows,
                      "cols": [c if c != " " else "␣" for c in source]},
        "stats": [
            _stat("correct", f"output correct (target {target})", float(prediction == target), 0),
            _stat("max_weight", "mean of each row's largest weight", w.max(-1).values.mean(), 3),
            _stat("entropy", "mean entropy of a row, nats", entropy, 3),
            _stat("exact_match", "the model's held-out exact match", model_exact_match, 4),
        ],
    }


class AlignmentExplorer(Explorer):
    """Score function (a trained model) x held-out example -> alignment heatmap.

    Built from precomputed alignments (so it works on the static page)::

        AlignmentExplorer(alignments, exact_match, sources, targets)

    alignments[model][i] = (prediction string, weights (len(prediction) + 1, len(source)))
    exact_match[model]: that model's held-out exact match; sources, targets: the examples.
    Traits: ``model`` (a key of alignments) and ``example`` (an index).
    """

    model = traitlets.Unicode().tag(sync=True)
    example = traitlets.Int(0).tag(sync=True)

    def __init__(self, alignments, exact_match, sources, targets, model=None, example=0, **kwargs):
        names = list(alignments)
        if not names:
            raise ValueError("alignments is empty: pass {model name: [(prediction, weights), ...]}")
        for name in names:
            if len(alignments[name]) != len(sources):
                raise ValueError(f"alignments[{name!r}] has {len(alignments[name])} examples, "
                                 f"sources has {len(sources)}")
        model = names[0] if model is None else model
        if model not in names:
            raise ValueError(f"model={model!r} must be one of {names}")
        if not 0 <= example < len(sources):
            raise ValueError(f"example={example!r} must be in 0..{len(sources) - 1}")
        controls = [
            {"name": "model", "label": "score function", "kind": "select", "options": names},
            {"name": "example", "label": "held-out example", "kind": "select",
             "options": list(range(len(sources))), "labels": list(sources)},
        ]
        panels = [
            {"kind": "heatmap", "key": "alignment",
             "title": "attention weights: output (rows) × input (columns)",
             "vmin": 0, "vmax": 1},
            {"kind": "stats", "key": "stats", "title": "this model on this example"},
        ]

        def frame(model, example):
            prediction, weights = alignments[model][example]
            return alignment_frame(sources[example], prediction, targets[example], weights,
                                   exact_match[model])

        spec = self.build_spec("alignment", "Where does each output character look?", controls,
                               panels, frame,
                               caption="Each row is one output character (greedy decoding), each "
                                       "column an input character; a row sums to 1.")
        super().__init__(spec=spec, model=model, example=example, **kwargs)
