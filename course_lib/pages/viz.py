"""Figures for the book: attention heatmaps, explorer fallbacks, source listings.

Colours are colour-blind safe: the Okabe–Ito palette for lines and bars,
viridis for heatmaps (the same choices as the explorers' JavaScript).
"""

from __future__ import annotations

import inspect
import textwrap

import matplotlib.pyplot as plt
import numpy as np

BLUE, ORANGE, GREEN, PINK = "#0072B2", "#E69F00", "#009E73", "#CC79A7"
SERIES = [BLUE, ORANGE, GREEN, PINK, "#56B4E9", "#D55E00"]
HEATMAP_CMAP = "viridis"


def show_source(obj):
    """Display the source of a course_lib function or class in the page.

    The book shows the library's own code (one source of truth) with this.
    """
    from IPython.display import Code

    return Code(inspect.getsource(obj), language="python")


def attention_heatmap(weights, x_labels=None, y_labels=None, ax=None, title=None,
                      vmin=0.0, vmax=1.0, annotate=False):
    """Heatmap of attention weights: rows are queries, columns are keys.

    weights: (T_q, T_k) array or tensor.
    """
    w = np.asarray(weights.detach().cpu() if hasattr(weights, "detach") else weights)
    if w.ndim != 2:
        raise ValueError(f"weights must be 2-D (T_q, T_k), got shape {tuple(w.shape)}")
    ax = ax or plt.subplots(figsize=(0.45 * w.shape[1] + 1.5, 0.45 * w.shape[0] + 1))[1]
    image = ax.imshow(w, cmap=HEATMAP_CMAP, vmin=vmin, vmax=vmax, aspect="auto")
    if x_labels is not None:
        ax.set_xticks(range(len(x_labels)), x_labels, rotation=60, ha="right")
    if y_labels is not None:
        ax.set_yticks(range(len(y_labels)), y_labels)
    if annotate:
        for (i, j), v in np.ndenumerate(w):
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7,
                    color="white" if v < (vmin + vmax) / 2 else "black")
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if title:
        ax.set_title(title)
    plt.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return ax


# --- static fallback of an explorer: the same panels, drawn by matplotlib ----

def _draw_histogram(ax, panel, d):
    edges = np.array(d["edges"])
    ax.stairs(d["counts"], edges, fill=True, color=BLUE)
    if "ymax" in panel:
        ax.set_ylim(0, panel["ymax"])


def _draw_bars(ax, panel, d):
    n = len(d["values"])
    colors = [ORANGE if i == d.get("highlight") else BLUE for i in range(n)]
    ax.bar(range(n), d["values"], color=colors)
    if min(d["values"]) < 0:  # bars grow from zero both ways (e.g. scores)
        ax.axhline(0, color="0.5", linewidth=0.8)
    if d.get("labels"):  # e.g. characters: shown as their repr, so "\n" and " " stay visible
        ax.set_xticks(range(n), [repr(c)[1:-1] or " " for c in d["labels"]],
                      fontsize=7, family="monospace")
    elif n <= 12:
        ax.set_xticks(range(n))
    if "ymin" in panel or "ymax" in panel:
        ax.set_ylim(panel.get("ymin", min(0, *d["values"])), panel.get("ymax"))


def _draw_lines(ax, panel, d):
    for k, series in enumerate(d["series"]):
        ax.plot(d["x"], series["y"], color=SERIES[k % len(SERIES)], label=series["label"])
    if panel.get("logy"):
        ax.set_yscale("log")
    if "ymin" in panel or "ymax" in panel:  # the explorer's own range (clipped as it clips)
        ax.set_ylim(panel.get("ymin"), panel.get("ymax"))
    ax.legend(fontsize=7)


def _draw_heatmap(ax, panel, d):
    ax.imshow(d["matrix"], cmap=HEATMAP_CMAP, vmin=panel.get("vmin", 0), vmax=panel.get("vmax", 1))
    if d.get("cols"):
        ax.set_xticks(range(len(d["cols"])), d["cols"], rotation=60, fontsize=7)
    if d.get("rows"):
        ax.set_yticks(range(len(d["rows"])), d["rows"], fontsize=7)


def _draw_heatmaps(ax, panel, d):
    """Small multiples: one heatmap per map, side by side inside the panel's axes."""
    ax.axis("off")
    n = len(d["maps"])
    for k, m in enumerate(d["maps"]):
        inner = ax.inset_axes([k / n + 0.02, 0.0, 1 / n - 0.04, 0.85])
        _draw_heatmap(inner, panel, {"matrix": m["matrix"], "rows": d.get("rows"), "cols": d.get("cols")})
        inner.set_title(m["title"], fontsize=8)


def _draw_text(ax, panel, d):
    """Lines of text (e.g. samples), cut at 80 characters, and the note under them."""
    ax.axis("off")
    lines = [line.replace("\n", "⏎ ")[:80] for line in d["lines"]] + ["", d.get("note", "")]
    ax.text(0, 0.5, "\n".join(lines), va="center", fontsize=7, family="monospace")


def _draw_tokens(ax, panel, d):
    """A text split into tokens: one box per token, colours alternating (as the explorer)."""
    ax.axis("off")
    fontsize = 9
    axes_points = ax.get_position().width * ax.get_figure(root=True).get_figwidth() * 72
    char = 0.6 * fontsize / axes_points          # the width of a monospace character, in axes units
    x, y = 0.0, 0.85
    for i, token in enumerate(d["tokens"]):
        shown = token.replace(" ", "·").replace("\n", "⏎")
        width = char * (len(shown) + 1.2)        # the box's padding included
        if x + width > 1.0 and x > 0:            # wrap to the next line
            x, y = 0.0, y - 0.22
        ax.text(x, y, shown, family="monospace", fontsize=fontsize, va="center",
                bbox={"boxstyle": "round,pad=0.2", "facecolor": (BLUE, ORANGE)[i % 2], "alpha": 0.25})
        x += width


def _number(value, digits):
    """`digits` decimals, or `digits` significant figures where that would print 0 or be long."""
    value = float(value)
    return f"{value:.{digits}f}" if value == 0 or 10**-digits <= abs(value) < 1e6 else f"{value:.{digits}g}"


def _draw_stats(ax, panel, d):
    ax.axis("off")
    lines = [f"{s['label']}: {_number(s['value'], s.get('digits', 3))}" for s in d]
    ax.text(0, 0.5, "\n".join(lines), va="center", fontsize=9, family="monospace")


_DRAW = {"histogram": _draw_histogram, "bars": _draw_bars, "lines": _draw_lines,
         "heatmap": _draw_heatmap, "heatmaps": _draw_heatmaps, "stats": _draw_stats, "text": _draw_text,
         "tokens": _draw_tokens}


def explorer_figure(spec, rows):
    """Draw an explorer's panels for several selections: one row per (selection, frame), headed
    by its selection (e.g. "d_k=4, scaled=False") above the row, where no tick label can hide it."""
    panels = spec["panels"]
    widths = [{"heatmaps": 3.0, "text": 2.5, "tokens": 2.5, "lines": 1.3}.get(p["kind"], 1.0) for p in panels]
    fig = plt.figure(figsize=(3.6 * sum(widths), 2.9 * len(rows)), layout="constrained")
    subfigures = fig.subfigures(len(rows), 1, squeeze=False)[:, 0]  # one per row: its heading above it
    for r, ((selection, frame), sub) in enumerate(zip(rows, subfigures)):
        axes = sub.subplots(1, len(panels), squeeze=False, width_ratios=widths)[0]
        for c, panel in enumerate(panels):
            ax = axes[c]
            _DRAW[panel["kind"]](ax, panel, frame[panel["key"]])
            if panel.get("xlabel") and panel["kind"] != "stats":
                ax.set_xlabel(panel["xlabel"], fontsize=8)
            if r == 0 and panel.get("title"):  # wrapped to the panel's width
                ax.set_title(textwrap.fill(panel["title"], int(38 * widths[c])), fontsize=9)
        label = ", ".join(f"{k}={v}" for k, v in selection.items())
        if label:
            label = textwrap.fill(label, int(60 * sum(widths)))
            sub.suptitle(label, x=0.01, ha="left", fontsize=9, weight="bold")
    fig.suptitle(spec.get("title", ""), fontsize=11)
    return fig
