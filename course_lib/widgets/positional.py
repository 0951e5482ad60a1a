"""Explorer of the chapter "Positional encodings": the sinusoidal table and its geometry."""

from __future__ import annotations

import torch
import traitlets

from ..positional import sinusoidal_encoding
from .base import Explorer, _round, _stat

__all__ = ["PositionsExplorer", "positions_frame", "D_MODEL_OPTIONS", "BASE_OPTIONS"]

D_MODEL_OPTIONS = [16, 32, 64, 128]
BASE_OPTIONS = [100, 10000]


def positions_frame(d_model, base, n_positions=40, max_offset=30, references=(0, 10, 20)):
    """One frame: the table PE (n_positions, d_model) and the similarity against the offset.

    similarity(p, k) = PE[p] . PE[p + k] / (d_model / 2), which is sum_i cos(w_i k) / (d/2):
    the same curve for every reference position p (it depends on the offset k only).
    """
    pe = sinusoidal_encoding(max(references) + max_offset + 1, d_model, base=float(base)).double()
    offsets = torch.arange(max_offset + 1)
    curves = [(pe[p] * pe[p + offsets]).sum(-1) / (d_model / 2) for p in references]  # each (K+1,)
    spread = torch.stack(curves).amax(0) - torch.stack(curves).amin(0)                 # (K+1,)
    table = pe[:n_positions]
    distances = torch.cdist(table, table) + torch.eye(n_positions) * 1e9               # (N, N)
    return {
        "table": {"matrix": [[round(float(v), 2) for v in row] for row in table],
                  "rows": [str(p) if p % 5 == 0 else "" for p in range(n_positions)]},
        "similarity": {"x": offsets.tolist(),
                       "series": [{"label": f"from position {p}", "y": _round(c, 4)}
                                  for p, c in zip(references, curves)]},
        "stats": [
            _stat("curve_spread", "largest gap between the three curves", spread.max(), 6),
            _stat("similarity_1", "similarity at offset 1", curves[0][1], 3),
            _stat("similarity_10", "similarity at offset 10", curves[0][10], 3),
            _stat("min_distance", f"closest two codes among {n_positions} positions", distances.min(), 3),
        ],
    }


class PositionsExplorer(Explorer):
    """Pick d_model and the base of the frequencies; see the table and its dot products.

    Traits set by the controls: ``d_model`` (16, 32, 64, 128) and ``base`` (100, 10000).
    """

    d_model = traitlets.Int(64).tag(sync=True)
    base = traitlets.Int(10000).tag(sync=True)

    def __init__(self, d_model=64, base=10000, n_positions=40, **kwargs):
        controls = [
            {"name": "d_model", "label": "d_model", "kind": "slider", "options": D_MODEL_OPTIONS},
            {"name": "base", "label": "base of the frequencies", "kind": "select",
             "options": BASE_OPTIONS},
        ]
        panels = [
            {"kind": "heatmap", "key": "table", "title": f"PE: positions 0–{n_positions - 1} (rows) "
             "× dimensions (columns)", "vmin": -1.0, "vmax": 1.0},
            {"kind": "lines", "key": "similarity", "title": "PE[p]·PE[p+k] / (d/2) against the "
             "offset k", "xlabel": "offset k", "ymin": -0.4, "ymax": 1.0},
            {"kind": "stats", "key": "stats", "title": "properties"},
        ]
        spec = self.build_spec(
            "positions", "Sinusoidal positional encodings", controls, panels,
            lambda d_model, base: positions_frame(d_model, base, n_positions),
            caption="Column pair (2i, 2i+1) is sin and cos of position × base^(−2i/d). "
                    "The three curves coincide: the similarity depends on the offset only.")
        super().__init__(spec=spec, d_model=d_model, base=base, **kwargs)
