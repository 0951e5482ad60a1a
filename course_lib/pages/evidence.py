"""The evidence protocol's tools: seeds with their spread, comparisons with a margin, glue.

Every comparative claim in the book (A beats B, X helps, Y fails) rests on >= 3 seeds at equal
budgets, is shown with its spread, and is asserted with a margin declared before the run. A sweep
too long for a notebook runs in `benchmarks/` and is committed (`course_lib.pages.sweeps`: load it,
draw it, compare a page's live run with it). Numbers in prose are glued from the run.

    summarize(values)                        per-seed values -> Summary (mean, std, min, max, n)
    assert_better(a, b, higher_is_better=)   the worst seed (or pair) of A beats B by a margin
    difference(a, b, paired=)                the difference of the means and its 95 % interval
    no_robust_difference(a, b)               the difference's interval holds 0; what size it rules out
    plot_seeds({label: values})              per-seed dots, mean and min-max bars for a few models
    glue(name, value)                        a number for the prose ({glue:text}`name:.2f`), via myst-nb
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

MIN_SEEDS = 3


# ---------------------------------------------------------------------------
# 1. Per-seed results and their spread
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Summary:
    """Per-seed values of one metric for one configuration, and their spread.

    std is the sample standard deviation (n - 1 in the denominator); NaN for a single value.
    """

    values: tuple
    label: str = ""

    @property
    def n(self):
        return len(self.values)

    @property
    def mean(self):
        return statistics.fmean(self.values)

    @property
    def std(self):
        return statistics.stdev(self.values) if self.n > 1 else math.nan

    @property
    def min(self):
        return min(self.values)

    @property
    def max(self):
        return max(self.values)

    def __str__(self):
        if self.n == 1:
            return f"{self.label or 'value'}: {self.values[0]:.4g} (one run)"
        seeds = " ".join(f"{v:.4g}" for v in self.values)
        return (f"{self.label or 'values'}: mean {self.mean:.4g} ± {self.std:.2g} (std), "
                f"range [{self.min:.4g}, {self.max:.4g}], n={self.n}; per seed {seeds}")


def summarize(values, label=""):
    """Summary of per-seed values (a list, a 1-D array or tensor, or a Summary).

    Rule: no NaN (a NaN makes every comparison False, silently); +-inf is kept (a diverged run).
    """
    return _as_summary(values, label, "values")


def _as_list(x):
    """One number (also a 0-d array or tensor) -> [x]; a sequence -> itself."""
    return [x] if not hasattr(x, "__iter__") or getattr(x, "ndim", 1) == 0 else x


def _as_summary(values, label, arg, default=""):
    if isinstance(values, Summary):
        return Summary(values.values, label or values.label or default)
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__") or getattr(values, "ndim", 1) == 0:
        raise TypeError(f"{arg} must be a sequence of per-seed numbers, got {type(values).__name__}")
    numbers = tuple(float(v) for v in values)
    if not numbers:
        raise ValueError(f"{arg} is empty: give one value per seed")
    if any(math.isnan(v) for v in numbers):
        raise ValueError(f"{arg} contains NaN: {numbers}")
    return Summary(numbers, label or default)


def _enough_seeds(summary, arg, min_seeds):
    if summary.n < min_seeds:
        raise ValueError(f"{arg} has {summary.n} value(s) ({summary.label or 'unlabelled'}); the evidence "
                         f"protocol needs >= {min_seeds} seeds for a comparison")


# ---------------------------------------------------------------------------
# 2. Comparisons that print what they compared
# ---------------------------------------------------------------------------

def _report(title, summaries, lines):
    width = max(len(s.label) for s in summaries)
    rows = [f"  {s.label:<{width}}  {str(s).split(': ', 1)[1]}" for s in summaries]
    return "\n".join([title, *rows, *lines])


def _paired(a, b):
    if a.n != b.n:
        raise ValueError(f"paired comparison needs one value per seed on each side, got {a.n} and {b.n}")
    return [x - y for x, y in zip(a.values, b.values)]


def assert_better(a, b, *, higher_is_better, margin, metric="metric", label_a=None, label_b=None,
                  paired=False, min_seeds=MIN_SEEDS):
    """Assert that A beats B by at least `margin`, and print the comparison.

    Unpaired (the default): the WORST seed of A beats the BEST seed of B by >= margin,
        higher is better:  min(A) - max(B) >= margin;  lower is better:  min(B) - max(A) >= margin.
    paired=True, for runs that share their seed (same data, same initial weights): every pair
    beats its partner by >= margin, min_i (A_i - B_i) >= margin (higher is better). Pass the
    values in the same seed order.
    `margin` is declared before the run (with the sweep's configuration). Both sides need
    >= min_seeds values. Raises AssertionError with the printed text when the claim fails.
    """
    a, b = _as_summary(a, label_a, "a", "A"), _as_summary(b, label_b, "b", "B")
    _enough_seeds(a, "a", min_seeds)
    _enough_seeds(b, "b", min_seeds)
    if not margin >= 0:
        raise ValueError(f"margin must be a number >= 0, got {margin}")
    sign = 1 if higher_is_better else -1
    direction = "higher" if higher_is_better else "lower"
    if paired:
        gaps = [sign * d for d in _paired(a, b)]
        gap = min(gaps)
        detail = f"  per-seed gaps {' '.join(f'{g:.4g}' for g in gaps)}: smallest {gap:.4g}"
    else:
        worst_a, best_b = (a.min, b.max) if higher_is_better else (a.max, b.min)
        gap = sign * (worst_a - best_b)
        detail = f"  worst {a.label} {worst_a:.4g} vs best {b.label} {best_b:.4g}: gap {gap:.4g}"
    ok = gap >= margin
    verdict = f"{detail} {'>=' if ok else '<'} margin {margin:.4g}  {'✓' if ok else '✗ NOT better'}"
    text = _report(f"{a.label} beats {b.label} on {metric} ({direction} is better)?", (a, b), [verdict])
    print(text)
    if not ok:
        raise AssertionError(text)


def _t_density(t, df):
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(log_c - (df + 1) / 2 * math.log1p(t * t / df))


def t_quantile(p, df):
    """The p-quantile of Student's t distribution with df degrees of freedom (0.5 <= p < 1).

    P(T <= t) = 1/2 + the integral of the density from 0 to t (Simpson's rule), solved for t by
    bisection. t_quantile(0.975, 2) = 4.303 (the tables' value).
    """
    if not 0.5 <= p < 1 or not df > 0:
        raise ValueError(f"need 0.5 <= p < 1 and df > 0, got p={p}, df={df}")

    def cdf(t, n=400):
        h = t / n
        inner = sum((4 if i % 2 else 2) * _t_density(i * h, df) for i in range(1, n))
        return 0.5 + h / 3 * (_t_density(0, df) + inner + _t_density(t, df))

    low, high = 0.0, 1.0
    while cdf(high) < p:
        low, high = high, high * 2
    for _ in range(50):
        mid = (low + high) / 2
        low, high = (mid, high) if cdf(mid) < p else (low, mid)
    return (low + high) / 2


@dataclass(frozen=True)
class Difference:
    """A - B with its 95 % interval, and the smallest true difference these seeds detect."""

    mean: float
    low: float
    high: float
    detectable: float   # with 80 % power at the 5 % level (two-sided)
    df: float


def difference(a, b, *, paired=False):
    """The difference of means A - B, its 95 % confidence interval (Student's t; Welch's when
    unpaired, on the per-seed differences when paired), and the detectable difference
    (t_0.975 + t_0.80) * SE: a true difference of that size would show in 4 of 5 such runs."""
    a, b = _as_summary(a, "", "a", "A"), _as_summary(b, "", "b", "B")
    _enough_seeds(a, "a", 2)
    _enough_seeds(b, "b", 2)
    if paired:
        diffs = summarize(_paired(a, b))
        mean, se, df = diffs.mean, diffs.std / math.sqrt(diffs.n), diffs.n - 1
    else:
        va, vb = a.std ** 2 / a.n, b.std ** 2 / b.n
        mean, se = a.mean - b.mean, math.sqrt(va + vb)
        df = (va + vb) ** 2 / (va ** 2 / (a.n - 1) + vb ** 2 / (b.n - 1)) if va + vb > 0 else a.n + b.n - 2
    half = t_quantile(0.975, df) * se
    return Difference(mean, mean - half, mean + half, (t_quantile(0.975, df) + t_quantile(0.80, df)) * se, df)


def no_robust_difference(a, b, *, metric="metric", label_a=None, label_b=None, paired=False,
                         min_seeds=MIN_SEEDS):
    """Say "no robust difference" honestly: print the difference A - B, its 95 % interval and the
    smallest difference these seeds could have detected; returns the Difference.

    Asserts only what the data show: the interval holds 0 (else the seeds DO show a difference
    and AssertionError says so). It never claims equality: a difference below `detectable` may
    exist unseen. Pass paired=True when the runs share their seeds (same data and initial weights).
    """
    a, b = _as_summary(a, label_a, "a", "A"), _as_summary(b, label_b, "b", "B")
    _enough_seeds(a, "a", min_seeds)
    _enough_seeds(b, "b", min_seeds)
    d = difference(a, b, paired=paired)
    ok = d.low <= 0 <= d.high
    lines = [
        f"  {a.label} - {b.label}: {d.mean:+.3g}, 95 % interval [{d.low:+.3g}, {d.high:+.3g}]"
        f" ({'paired' if paired else 'unpaired'}, {d.df:.3g} df)",
        f"  smallest difference these seeds detect (80 % power): {d.detectable:.3g}  "
        + ("✓ no robust difference" if ok else "✗ the interval excludes 0: the seeds show a difference"),
    ]
    text = _report(f"{a.label} vs {b.label} on {metric}: a difference?", (a, b), lines)
    print(text)
    if not ok:
        raise AssertionError(text)
    return d


# ---------------------------------------------------------------------------
# 3. Figures: per-seed dots, mean and spread
# ---------------------------------------------------------------------------

def plot_seeds(results, *, ax=None, metric="", colors=None):
    """Per-seed dots, mean and min-max bars for a few models: results = {label: per-seed values}."""
    import matplotlib.pyplot as plt

    from .viz import SERIES

    ax = ax or plt.subplots(figsize=(1.2 * len(results) + 2, 3))[1]
    for k, (name, values) in enumerate(results.items()):
        s, c = summarize(values, name), (colors or SERIES)[k % len(colors or SERIES)]
        ax.plot([k] * s.n, s.values, "o", ms=4, color=c, alpha=0.5)
        ax.errorbar([k], [s.mean], yerr=[[s.mean - s.min], [s.max - s.mean]], fmt="_", ms=16, color=c,
                    capsize=5, lw=1.5)
    ax.set_xticks(range(len(results)), list(results))
    ax.set_xlim(-0.5, len(results) - 0.5)
    ax.set_ylabel(metric)
    return ax


# ---------------------------------------------------------------------------
# 4. Numbers for the prose
# ---------------------------------------------------------------------------

def glue(name, value, display=False):
    """Store `value` under `name` for the prose: {glue:text}`name` or {glue:text}`name:.2f`.

    Rule: a number in the text comes from the run. The value is first made a plain Python int,
    float or str (a numpy scalar or 0-d tensor would otherwise reach the page as
    'np.float64(2.13)' or 'tensor(2.13)', which the role cannot format); NaN is refused.
    With myst-nb installed (the book build), this is myst_nb.glue: the value is stored in the
    cell's output with the `scrapbook` metadata the book reads. Without it (Colab, a plain
    Jupyter), nothing is stored and, unless display=True, nothing is shown. Returns None (a
    glue on a cell's last line echoes nothing).
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    if hasattr(value, "shape") and tuple(value.shape) != ():
        raise ValueError(f"glue {name!r}: value must be one number, got shape {tuple(value.shape)}")
    if hasattr(value, "item") and type(value) not in (int, float, str):  # np.float64 is a float
        value = value.item()  # numpy scalar, 0-d array or tensor -> int or float
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(f"glue {name!r}: value must be a number or a string, got {type(value).__name__}")
    if isinstance(value, float) and math.isnan(value):
        raise ValueError(f"glue {name!r}: value is NaN")
    try:
        from myst_nb import glue as myst_glue
    except ImportError:
        myst_glue = None
    if myst_glue is not None:
        myst_glue(name, value, display=display)
    elif display:
        from IPython.display import display as show

        show(value)
