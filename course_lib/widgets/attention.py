"""Explorers of the chapter "Scaled dot-product attention"."""

from __future__ import annotations

import math

import torch
import traitlets

from .. import attention
from .base import Explorer, _round, _stat

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
    the softmax weights of a typical query over `n_keys` keys (the query whose
    largest weight is the median), and, over `n_queries` queries (each over the
    same keys), the median largest weight, the entropy and the size of the softmax gradient.
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
    largest = weights.max(-1).values                                      # (N,)
    w0 = weights[largest.argsort()[n_queries // 2]]   # the typical query: its largest weight is the median
    return {
        "scores": {"edges": _round(edges), "counts": _round(density, 5)},
        "weights": {"values": _round(w0, 6), "highlight": int(w0.argmax())},
        "stats": [
            _stat("variance", "variance of the scores (8192 pairs)", pair_scores.var(), 2),
            _stat("expected_variance", "expected variance (1 or d_k)", 1.0 if scaled else float(d_k), 0),
            _stat("max_weight", "largest weight (median)", weights.max(-1).values.median(), 3),
            _stat("entropy", f"entropy, nats (uniform: {math.log(n_keys):.2f})", entropy.median(), 3),
            _stat("grad_norm", "softmax gradient ‖∂p/∂s‖", softmax_gradient_norm(weights).median(), 6),
        ],
    }


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
            {"kind": "bars", "key": "weights", "title": f"weights of a typical query over {n_keys} keys",
             "xlabel": "key", "ymax": 1.0},
            {"kind": "stats", "key": "stats",
             "title": f"medians over {n_queries} queries"},
        ]
        spec = self.build_spec(
            "dk", "Why divide by √d_k?", controls, panels,
            lambda d_k, scaled: dk_frame(d_k, scaled, n_queries, n_keys, seed),
            caption="q and k have independent unit-variance components; "
                    "the score q·k is a sum of d_k such products.")
        super().__init__(spec=spec, d_k=d_k, scaled=scaled, **kwargs)
