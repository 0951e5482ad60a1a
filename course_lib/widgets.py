"""Explorers: interactive figures that also work on the static site.

Every explorer is an anywidget widget rendered by one shared front end,
``course_lib/static/explorer.js``. Python computes a *frame* (the data of every
panel) for each combination of the control values, and the page switches between
frames, so the explorer reacts with no kernel. With a kernel (Jupyter, Colab),
moving a control also sets the matching trait in Python::

    ex = DkExplorer()
    ex                  # shows the explorer
    ex.d_k, ex.scaled   # the values the learner picked
    ex.frame()          # the numbers behind the current picture

Each explorer also draws a static matplotlib figure (``ex.figure(...)``) for
print, PDF and readers without JavaScript.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import anywidget
import torch
import traitlets

from . import attention, viz

STATIC = Path(__file__).parent / "static"


def frame_key(indices) -> str:
    """Key of a frame: the option index of each control, joined by '|' (e.g. '6|1')."""
    return "|".join(str(int(i)) for i in indices)


class Explorer(anywidget.AnyWidget):
    """Base class: a ``spec`` of controls, panels and precomputed frames.

    A subclass declares one synced trait per control (same name) and calls
    ``super().__init__(spec=...)`` with a spec built by :meth:`build_spec`.
    """

    _esm = STATIC / "explorer.js"
    _css = STATIC / "explorer.css"
    spec = traitlets.Dict().tag(sync=True)

    @staticmethod
    def build_spec(name, title, controls, panels, compute_frame, caption=""):
        """Compute one frame per combination of control values.

        controls: list of {"name", "label", "kind", "options"[, "labels"]}
        compute_frame(**values) -> {panel key: panel data}
        """
        frames = {}
        option_lists = [range(len(c["options"])) for c in controls]
        for indices in itertools.product(*option_lists):
            values = {c["name"]: c["options"][i] for c, i in zip(controls, indices)}
            frames[frame_key(indices)] = compute_frame(**values)
        return dict(name=name, title=title, caption=caption,
                    controls=controls, panels=panels, frames=frames)

    def _control(self, name):
        for control in self.spec["controls"]:
            if control["name"] == name:
                return control
        raise KeyError(name)

    def _check_option(self, name, value):
        options = self._control(name)["options"]
        if value not in options:
            raise ValueError(f"{name}={value!r} is not one of the explorer's options {options}")
        return value

    def frame(self, **values) -> dict:
        """The data of every panel for the current control values (or the ones given)."""
        indices = []
        for control in self.spec["controls"]:
            value = values.get(control["name"], getattr(self, control["name"]))
            indices.append(control["options"].index(self._check_option(control["name"], value)))
        return self.spec["frames"][frame_key(indices)]

    def figure(self, selections=None):
        """Static fallback: the panels drawn by matplotlib, one row per selection.

        selections: list of dicts of control values (default: the current values).
        """
        selections = selections or [{}]
        rows = [(sel, self.frame(**sel)) for sel in selections]
        return viz.explorer_figure(self.spec, rows)


# ---------------------------------------------------------------------------
# The d_k explorer: why scaled dot-product attention divides by sqrt(d_k)

D_K_OPTIONS = [2**i for i in range(11)]  # 1, 2, 4, ..., 1024


def softmax_gradient_norm(weights: torch.Tensor) -> torch.Tensor:
    """Size of the softmax gradient: the Frobenius norm of its Jacobian.

    For p = softmax(s), dp/ds = diag(p) - p p^T. When p saturates (one weight
    near 1) this matrix goes to zero and almost no gradient reaches the scores.

    weights: (..., T) -> (...)
    """
    jacobian = torch.diag_embed(weights) - weights.unsqueeze(-1) * weights.unsqueeze(-2)  # (..., T, T)
    return jacobian.flatten(-2).norm(dim=-1)


def dk_frame(d_k, scaled, n_queries=512, n_keys=16, seed=0, n_pairs=8192, bins=41, x_range=40.0):
    """One frame of the d_k explorer: random q, k with unit-variance components.

    Returns the panels' data: a histogram of the score q·k over `n_pairs`
    independent query-key pairs (its variance is ~d_k unscaled, ~1 scaled),
    the softmax weights of one query over `n_keys` keys, and, for a typical
    query (the median over `n_queries` queries, each over the same keys), the
    largest weight, the entropy and the size of the softmax gradient.
    """
    g = torch.Generator().manual_seed(seed)
    score_fn = attention.scaled_dot_score if scaled else attention.dot_score

    q = torch.randn(n_pairs, 1, d_k, generator=g, dtype=torch.float64)   # (P, 1, d_k)
    k = torch.randn(n_pairs, 1, d_k, generator=g, dtype=torch.float64)   # (P, 1, d_k)
    pair_scores = score_fn(q, k).flatten()                                # (P,)

    q = torch.randn(n_queries, d_k, generator=g, dtype=torch.float64)    # (N, d_k)
    k = torch.randn(n_keys, d_k, generator=g, dtype=torch.float64)       # (T, d_k)
    weights = torch.softmax(score_fn(q, k), dim=-1)                       # (N, T)
    entropy = -(weights * torch.log(weights.clamp_min(1e-300))).sum(-1)  # (N,)

    edges = torch.linspace(-x_range, x_range, bins + 1, dtype=torch.float64)
    counts = torch.histc(pair_scores.clamp(-x_range, x_range), bins=bins, min=-x_range, max=x_range)
    density = counts / (counts.sum() * (edges[1] - edges[0]))
    w0 = weights[0]
    return {
        "scores": {"edges": _round(edges), "counts": _round(density, 5)},
        "weights": {"values": _round(w0, 6), "highlight": int(w0.argmax())},
        "stats": [
            _stat("variance", "variance of the scores", pair_scores.var(), 2),
            _stat("expected_variance", "expected variance (1 or d_k)", 1.0 if scaled else float(d_k), 0),
            _stat("max_weight", "largest weight", weights.max(-1).values.median(), 3),
            _stat("entropy", f"entropy, nats (uniform: {math.log(n_keys):.2f})", entropy.median(), 3),
            _stat("grad_norm", "softmax gradient ‖∂p/∂s‖", softmax_gradient_norm(weights).median(), 6),
        ],
    }


def _round(t, digits=4):
    return [round(float(v), digits) for v in t.flatten()]


def _stat(name, label, value, digits):
    return {"name": name, "label": label, "value": round(float(value), 6), "digits": digits}


class DkExplorer(Explorer):
    """Pick d_k and toggle the 1/sqrt(d_k) scaling; watch the scores and the softmax.

    Traits set by the controls: ``d_k`` (1, 2, 4, ..., 1024) and ``scaled`` (bool).
    """

    d_k = traitlets.Int(64).tag(sync=True)
    scaled = traitlets.Bool(False).tag(sync=True)

    def __init__(self, d_k=64, scaled=False, n_queries=512, n_keys=16, seed=0, **kwargs):
        if d_k not in D_K_OPTIONS:
            raise ValueError(f"d_k={d_k!r} must be one of {D_K_OPTIONS}")
        controls = [
            {"name": "d_k", "label": "d_k", "kind": "slider", "options": D_K_OPTIONS},
            {"name": "scaled", "label": "divide by √d_k", "kind": "toggle", "options": [False, True]},
        ]
        panels = [
            {"kind": "histogram", "key": "scores", "title": "distribution of the score q·k",
             "xlabel": "score (clipped to ±40)", "ymax": 0.45},
            {"kind": "bars", "key": "weights", "title": f"softmax weights of one query over {n_keys} keys",
             "xlabel": "key", "ymax": 1.0},
            {"kind": "stats", "key": "stats",
             "title": f"variance over 8192 pairs; the rest for a typical query (median over {n_queries})"},
        ]
        spec = self.build_spec(
            "dk", "Why divide by √d_k?", controls, panels,
            lambda d_k, scaled: dk_frame(d_k, scaled, n_queries, n_keys, seed),
            caption="q and k have independent unit-variance components; "
                    "the score q·k is a sum of d_k such products.")
        super().__init__(spec=spec, d_k=d_k, scaled=scaled, **kwargs)
