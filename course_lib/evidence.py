"""The evidence protocol's tools: seeds with their spread, comparisons with a margin, committed sweeps.

Every comparative claim in the book (A beats B, X helps, Y fails) rests on >= 3 seeds at equal
budgets, is shown with its spread, and is asserted with a margin declared before the run. A sweep
too long for a notebook runs in `benchmarks/`, is committed as `course_lib/sweeps/NAME.json`, and
the notebook draws it beside its own live run. Numbers in prose are glued from the run.

    summarize(values)                        per-seed values -> Summary (mean, std, min, max, n)
    assert_better(a, b, higher_is_better=)   the worst seed (or pair) of A beats B by a margin
    no_robust_difference(a, b)               the difference's interval holds 0; what size it rules out
    check_live(live, sweep, metric, ...)     this page's run against the sweep's runs of its seeds
    kernel_set(), same_kernels(recorded)     which CPU kernels torch computes with here
    load_sweep(name) -> Sweep                a committed sweep (package data, works when pip-installed)
    plot_sweep(sweep, metric, x, live=...)   the sweep's seeds, mean and min-max band, a live run on top
    plot_seeds({label: values})              per-seed dots, mean and min-max bars for a few models
    glue(name, value)                        a number for the prose ({glue:text}`name:.2f`), via myst-nb

Why a live run can differ from its sweep: torch picks its CPU kernels by processor (AVX-512,
AVX2, ARM, a GPU), and each adds floats in its own order. Training is chaotic, so after a few
hundred steps two such runs can end apart. On the kernels the sweep was made with, the page's run
reproduces the sweep's run of the same seed exactly; elsewhere it is one more sample, compared
with the sweep's spread.
"""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

SCHEMA = "course_lib.sweep/2"
REQUIRED = ["name", "title", "config", "points", "seeds", "metrics", "margins", "runs", "kernels",
            "provenance", "command", "wall_seconds", "machine", "date"]
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
# 3. Live runs, and the CPU kernels they ran on
# ---------------------------------------------------------------------------

KERNEL_KEYS = ("torch", "device", "cpu", "aten", "mkl", "onednn", "threads")


def cpu_vendor():
    """"GenuineIntel", "AuthenticAMD", ... (the machine type where Linux's cpuinfo is missing).
    MKL takes other paths on Intel and AMD even with MKL_CBWR set (measured), so it counts."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("vendor_id"))
    except (OSError, StopIteration):
        return platform.machine() or "unknown"


def kernel_set():
    """The kernels torch computes with in this process: its version, the device the course's
    models use (train.default_device), the CPU's vendor, ATen's CPU capability, MKL's and
    oneDNN's instruction-set settings (MKL_CBWR, ONEDNN_MAX_CPU_ISA; "auto" when unset) and
    the number of threads."""
    import torch

    return {
        "torch": torch.__version__,
        "device": "cuda" if torch.cuda.is_available() else "cpu",
        "cpu": cpu_vendor(),
        "aten": torch.backends.cpu.get_cpu_capability(),
        "mkl": os.environ.get("MKL_CBWR", "auto"),
        "onednn": os.environ.get("ONEDNN_MAX_CPU_ISA", "auto"),
        "threads": torch.get_num_threads(),
    }


def same_kernels(recorded):
    """True when this process computes with the kernels `recorded` (a kernel_set() dict)."""
    here = kernel_set()
    return all(here[k] == recorded.get(k) for k in KERNEL_KEYS)


def _describe(kernels):
    k = kernels.get
    return (f"torch {k('torch')} on {k('device')} ({k('cpu')}), ATen {k('aten')}, MKL {k('mkl')}, "
            f"oneDNN {k('onednn')}, {k('threads')} thread(s)")


def check_live(live, sweep, metric, *, where=None, label="this page's run"):
    """Compare this page's own run with the committed sweep's runs of the same seeds.

    live: one value (the sweep's first seed), a list (its first len(live) seeds) or {seed: value};
    where: the sweep's point, e.g. {"heads": 1, "steps": 500}.
    On the kernels the sweep was made with (same_kernels(sweep.kernels)), the run must reproduce
    the sweep exactly: a difference means the code or data changed since the sweep ran, and
    raises AssertionError. On other kernels (another CPU, a GPU, another torch) a chaotic run can
    end elsewhere: it is compared with the sweep's spread and a notice says when it falls
    outside; this never raises.
    """
    where = where or {}
    seeds = list(sweep.seeds)
    if isinstance(live, dict):
        pairs = {int(s): float(v) for s, v in live.items()}
    else:
        values = [float(v) for v in _as_list(live)]
        if len(values) > len(seeds):
            raise ValueError(f"{len(values)} live values for the sweep's {len(seeds)} seeds {seeds}")
        pairs = dict(zip(seeds, values))
    committed = dict(zip(seeds, sweep.values(metric, **where)))
    unknown = sorted(set(pairs) - set(committed))
    if unknown:
        raise ValueError(f"live seeds {unknown} are not among the sweep's seeds {seeds}")
    at = ", ".join(f"{k}={v}" for k, v in where.items()) or sweep.name
    spread = summarize(list(committed.values()), f"sweep {sweep.name} ({at})")
    head = [f"{label} against the committed sweep on {metric}:", f"  {spread}"]
    if same_kernels(sweep.kernels):
        lines = [f"  seed {s}: {v:.6g} here, {committed[s]:.6g} in the sweep"
                 + ("  ✓ reproduced" if v == committed[s] else "  ✗ DIFFERENT") for s, v in pairs.items()]
        text = "\n".join(head + lines + [f"  (same kernels as the sweep: {_describe(sweep.kernels)})"])
        print(text)
        if any(v != committed[s] for s, v in pairs.items()):
            raise AssertionError(
                text + "\nOn the sweep's own kernels the page must reproduce it: the code or the data "
                "changed since the sweep ran (python benchmarks/sweep.py --check names what).")
        return None
    outside = {s: v for s, v in pairs.items() if not spread.min <= v <= spread.max}
    lines = [f"  seed {s}: {v:.4g} here, {committed[s]:.4g} in the sweep" for s, v in pairs.items()]
    lines.append(f"  kernels here: {_describe(kernel_set())}; the sweep's: {_describe(sweep.kernels)}")
    if outside:
        lines.append(
            f"  Notice: {label} falls outside the sweep's range [{spread.min:.4g}, {spread.max:.4g}]. "
            "Other kernels add floats in another order, and a training run amplifies such differences; "
            "the page's claims rest on the committed sweep.")
    else:
        lines.append(f"  inside the sweep's range [{spread.min:.4g}, {spread.max:.4g}]")
    print("\n".join(head + lines))
    return None


# ---------------------------------------------------------------------------
# 4. Committed sweeps
# ---------------------------------------------------------------------------

class Sweep:
    """A committed sweep: configuration, seeds, per-seed results, and how they were made.

    The JSON fields (schema "course_lib.sweep/2") are attributes: name, title, description,
    config, points, seeds, metrics, margins (declared with the configuration, before the run),
    runs, kernels (kernel_set() of the runs), provenance (what the run executed: see
    benchmarks/provenance.py), command, wall_seconds, machine, date. Each run is
    {"point": {...}, "seed": s, "results": {metric: value}, "seconds": t}. Select a
    configuration by its point's parameters: sweep.values("bpc", kind="lstm") -> per-seed values.
    """

    def __init__(self, data):
        if data.get("schema") != SCHEMA:
            raise ValueError(f"not a {SCHEMA} file (schema {data.get('schema')!r})")
        missing = [k for k in REQUIRED if k not in data]
        if missing:
            raise ValueError(f"sweep {data.get('name')!r} lacks the field(s) {missing}")
        self.data = data
        self.__dict__.update({k: v for k, v in data.items() if k != "data"})

    def __repr__(self):
        return (f"Sweep({self.name!r}: {len(self.points)} points × {len(self.seeds)} seeds, "
                f"metrics {sorted(self.metrics)}, {self.date})")

    def margin(self, name):
        """The margin `name` declared with the sweep's configuration before it ran."""
        if name not in self.margins:
            raise KeyError(f"sweep {self.name!r} declares no margin {name!r}; "
                           f"it declares {sorted(self.margins)}")
        return self.margins[name]

    def select(self, **where):
        """The points whose parameters include all of `where`."""
        return [p for p in self.points if all(k in p and p[k] == v for k, v in where.items())]

    def values(self, metric, **where):
        """Per-seed values of `metric` at the one point selected by `where`, in seed order."""
        if metric not in self.metrics:
            raise KeyError(f"sweep {self.name!r} has no metric {metric!r}; it has {sorted(self.metrics)}")
        points = self.select(**where)
        if len(points) != 1:
            raise ValueError(f"sweep {self.name!r}: {where} selects {len(points)} points, need exactly 1; "
                             f"its points are {self.points}")
        runs = sorted((r for r in self.runs if r["point"] == points[0]), key=lambda r: r["seed"])
        return [r["results"][metric] for r in runs]

    def summary(self, metric, **where):
        """Summary of values(metric, **where), labelled by the selection."""
        label = ", ".join(f"{k}={v}" for k, v in where.items()) or self.name
        return summarize(self.values(metric, **where), label)


def read_sweep(path):
    """A Sweep from a JSON file at `path`."""
    return Sweep(json.loads(Path(path).read_text(encoding="utf-8")))


def load_sweep(name):
    """The committed sweep `name` (course_lib/sweeps/NAME.json), read as package data.

    Works from a repository checkout, an editable install and a pip-installed wheel (Colab).
    """
    path = resources.files("course_lib").joinpath("sweeps", f"{name}.json")
    if not path.is_file():
        raise FileNotFoundError(f"no committed sweep {name!r}; committed: {committed_sweeps()}")
    return Sweep(json.loads(path.read_text(encoding="utf-8")))


def committed_sweeps():
    """Names of the sweeps in course_lib/sweeps/."""
    folder = resources.files("course_lib").joinpath("sweeps")
    if not folder.is_dir():
        return []
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".json"))


# ---------------------------------------------------------------------------
# 5. Figures: seeds, spread, and a live run on top
# ---------------------------------------------------------------------------

def _is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def plot_sweep(sweep, metric, x, *, where=None, ax=None, color=None, label=None, live=None,
               live_label="this run"):
    """Draw a committed sweep against parameter `x` and overlay a live run.

    For each value of `x` among the points selected by `where` (a dict; every other parameter
    must be fixed by it): one dot per seed, the mean, and the min-max range (a band for a numeric
    `x`, error bars for a categorical one: no line joins categories). `live` maps x values to a
    live value or list of values (drawn as large diamonds). Colours: course_lib.viz (Okabe-Ito).
    """
    import matplotlib.pyplot as plt

    from .viz import BLUE, ORANGE

    ax = ax or plt.subplots(figsize=(5, 3.2))[1]
    color = color or BLUE
    points = sweep.select(**(where or {}))
    xs = [p[x] for p in points]
    if not points or len(set(map(repr, xs))) != len(xs):
        raise ValueError(f"plot_sweep: where={where} must select points with distinct {x!r}, got {points}")
    numeric = all(_is_number(v) for v in xs)
    order = sorted(range(len(xs)), key=lambda i: xs[i]) if numeric else range(len(xs))
    pos = {repr(xs[i]): (xs[i] if numeric else k) for k, i in enumerate(order)}
    s = [summarize(sweep.values(metric, **points[i])) for i in order]
    at = [pos[repr(xs[i])] for i in order]
    for xi, si in zip(at, s, strict=True):
        ax.plot([xi] * si.n, si.values, "o", ms=3.5, color=color, alpha=0.45, zorder=2)
    means = [si.mean for si in s]
    if numeric:
        ax.fill_between(at, [si.min for si in s], [si.max for si in s], color=color, alpha=0.18, lw=0)
        ax.plot(at, means, "-", color=color, lw=1.6, label=label or f"{sweep.name} (mean, min–max)")
    else:
        err = [[si.mean - si.min for si in s], [si.max - si.mean for si in s]]
        ax.errorbar(at, means, yerr=err, fmt="_", ms=14, color=color, capsize=4, lw=1.4,
                    label=label or f"{sweep.name} (mean, min–max)")
        ax.set_xticks(at, [str(xs[i]) for i in order])
        ax.set_xlim(-0.5, len(at) - 0.5)
    for k, (xv, value) in enumerate((live or {}).items()):
        if repr(xv) not in pos:
            raise ValueError(f"live x={xv!r} is not among the sweep's {x!r} values {xs}")
        ys = [float(v) for v in _as_list(value)]
        ax.plot([pos[repr(xv)]] * len(ys), ys, "D", ms=7, color=ORANGE, mec="black", mew=0.8, zorder=3,
                label=live_label if k == 0 else None)
    unit = sweep.metrics[metric].get("unit", "")
    ax.set_xlabel(x)
    ax.set_ylabel(f"{metric} ({unit})" if unit else metric)
    ax.legend(fontsize=8)
    return ax


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
# 6. Numbers for the prose
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
