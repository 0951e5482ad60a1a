"""Explorers of the chapter "Multi-head attention and masks".

    HeadsExplorer   per-head attention maps of small trained models, h in {1, 2, 4, 8}
    MasksExplorer   toggle the padding and the causal mask on a padded batch

Both only switch between precomputed frames, so they work on the static page.
"""

from __future__ import annotations

import torch
import traitlets

from .. import attention
from .base import Explorer, _stat

__all__ = ["HeadsExplorer", "MasksExplorer", "masks_frame", "MASK_SENTENCES"]


# ---------------------------------------------------------------------------
# Heads explorer: what does each head of a trained model look at?
# ---------------------------------------------------------------------------

class HeadsExplorer(Explorer):
    """Pick the number of heads h and an input; see every head's attention map.

    maps: {h: weights (n_examples, h, T_q, T_k)} from models with h heads (e.g. the
        `weights` returned by course_lib.multihead.MultiHeadAttention);
    labels: per example, (query labels, key labels) (lists of T_q and T_k strings);
    stats: {h: [(name, label, value, digits), ...]} shown under the maps (e.g. held-out
        accuracy of the model with h heads), the same names for every h.

    Traits set by the controls: ``heads`` and ``example`` (an index into the examples).
    """

    heads = traitlets.Int().tag(sync=True)
    example = traitlets.Int(0).tag(sync=True)

    def __init__(self, maps, labels, stats=None, heads=None, example=0, title=None,
                 caption="", **kwargs):
        head_options = sorted(int(h) for h in maps)
        n_examples = len(labels)
        for h in head_options:
            w = maps[h]
            if w.dim() != 4 or w.shape[0] != n_examples or w.shape[1] != h:
                raise ValueError(f"maps[{h}] must be (n_examples={n_examples}, h={h}, T_q, T_k), "
                                 f"got shape {tuple(w.shape)}")
        stats = stats or {}
        controls = [
            {"name": "heads", "label": "heads h", "kind": "slider", "options": head_options},
            {"name": "example", "label": "input", "kind": "select",
             "options": list(range(n_examples)), "labels": ["".join(c) for c, _ in labels]},
        ]
        panels = [
            {"kind": "heatmaps", "key": "maps", "title": "attention weights of each head "
             "(rows: queries, columns: keys)", "vmin": 0.0, "vmax": 1.0},
            {"kind": "stats", "key": "stats", "title": "the model with these heads"},
        ]

        def frame(heads, example):
            w = maps[heads][example]                                     # (h, T_q, T_k)
            rows, cols = labels[example]
            return {
                "maps": {"maps": [{"title": f"head {i + 1} of {heads}", "matrix": _matrix(w[i])}
                                  for i in range(heads)],
                         "rows": list(rows), "cols": list(cols)},
                "stats": [_stat(n, lab, v, d) for n, lab, v, d in stats.get(heads, [])]
                + [_stat("num_maps", "heads shown", heads, 0)],
            }

        spec = self.build_spec("heads", title or "What does each head look at?", controls,
                               panels, frame, caption=caption)
        heads = head_options[-1] if heads is None else heads
        super().__init__(spec=spec, heads=heads, example=example, **kwargs)

    def figure(self, selections=None):
        """Static fallback (`viz.explorer_figure`): one row per selection (default: every h)."""
        return super().figure(selections or [{"heads": h} for h in self._control("heads")["options"]])


def _matrix(w, digits=3):
    return [[round(float(v), digits) for v in row] for row in w]


# ---------------------------------------------------------------------------
# Masks explorer: padding and causal masks on a padded batch
# ---------------------------------------------------------------------------

MASK_SENTENCES = ["the cat sat on the mat", "dogs bark", "it was too tired"]
"""The padded batch of the masks explorer (one token per word, padded to the longest)."""


def masks_frame(q, k, v, lengths, sequence, padding, causal):
    """Self-attention weights of one sequence of a padded batch under the chosen masks.

    q, k, v: (B, T, d); lengths: (B,). Returns the panels' data: the weights (T, T), the
    mask in the course's convention (True = allowed, as F.scaled_dot_product_attention)
    and the same mask as nn.MultiheadAttention wants it (True = blocked), and statistics.
    """
    B, T, _ = q.shape
    mask = torch.ones(B, 1, T, T, dtype=torch.bool)                         # (B, 1, T, T)
    if padding:
        mask = mask & attention.padding_mask(lengths, T)                    # (B, 1, 1, T)
    if causal:
        mask = mask & attention.causal_mask(T)                              # (T, T)
    _, weights = attention.scaled_dot_product_attention(q, k, v, mask=mask[:, 0])  # (B, T, T)
    w, m = weights[sequence], mask[sequence, 0]                             # (T, T) each
    n = int(lengths[sequence])
    future = torch.ones(T, T, dtype=torch.bool).triu(1)                     # j > i
    real_rows = w[:n]                                                        # queries at real tokens
    return {
        "weights": {"matrix": _matrix(w)},
        "allowed": {"matrix": _matrix(m.float(), 0)},
        "blocked": {"matrix": _matrix((~m).float(), 0)},
        "stats": [
            _stat("future_weight", "weight on future keys (j > i)", w[future].sum(), 3),
            _stat("pad_weight", "weight real tokens give to pads", real_rows[:, n:].sum(), 3),
            _stat("row_sum_min", "smallest row sum", w.sum(-1).min(), 3),
            _stat("allowed_pairs", "allowed (query, key) pairs", m.sum(), 0),
        ],
    }


class MasksExplorer(Explorer):
    """Toggle the padding mask and the causal mask; see the weights and the masks change.

    A batch of `sentences` (one token per word), padded to the longest, goes through one
    head of self-attention with seeded random projections. Traits set by the controls:
    ``sequence`` (index into the batch), ``padding`` and ``causal`` (bool).
    """

    sequence = traitlets.Int(1).tag(sync=True)
    padding = traitlets.Bool(False).tag(sync=True)
    causal = traitlets.Bool(False).tag(sync=True)

    def __init__(self, sentences=MASK_SENTENCES, d=16, seed=0, sequence=1, padding=False,
                 causal=False, **kwargs):
        words = [s.split() for s in sentences]
        T = max(len(w) for w in words)
        tokens = [w + ["<pad>"] * (T - len(w)) for w in words]
        lengths = torch.tensor([len(w) for w in words])
        g = torch.Generator().manual_seed(seed)
        vocab = sorted({t for ts in tokens for t in ts})
        table = torch.randn(len(vocab), d, generator=g)                       # one vector per word
        x = table[torch.tensor([[vocab.index(t) for t in ts] for ts in tokens])]  # (B, T, d)
        w_q, w_k = (torch.randn(d, d, generator=g) / d**0.5 for _ in range(2))
        q, k = x @ w_q, x @ w_k                                               # (B, T, d)
        self.tokens = tokens
        controls = [
            {"name": "sequence", "label": "sequence", "kind": "select",
             "options": list(range(len(sentences))), "labels": list(sentences)},
            {"name": "padding", "label": "padding mask", "kind": "toggle", "options": [False, True]},
            {"name": "causal", "label": "causal mask", "kind": "toggle", "options": [False, True]},
        ]
        panels = [
            {"kind": "heatmap", "key": "weights", "title": "attention weights (rows: queries)",
             "vmin": 0.0, "vmax": 1.0},
            {"kind": "heatmap", "key": "allowed", "title": "mask for F.scaled_dot_product_attention "
             "and course_lib (1 = True = may attend)", "vmin": 0.0, "vmax": 1.0},
            {"kind": "heatmap", "key": "blocked", "title": "the same mask for nn.MultiheadAttention "
             "(1 = True = blocked)", "vmin": 0.0, "vmax": 1.0},
            {"kind": "stats", "key": "stats", "title": "checks"},
        ]

        def frame(sequence, padding, causal):
            data = masks_frame(q, k, x, lengths, sequence, padding, causal)
            for key in ("weights", "allowed", "blocked"):
                data[key]["rows"] = data[key]["cols"] = tokens[sequence]
            return data

        spec = self.build_spec("masks", "Padding and causal masks", controls, panels, frame,
                               caption="One head of self-attention over a padded batch. "
                                       "Masked scores become -inf before the softmax.")
        super().__init__(spec=spec, sequence=sequence, padding=padding, causal=causal, **kwargs)
