"""The evidence protocol's tools: seeds with their spread, comparisons with a margin, committed sweeps.

Every comparative claim in the book (A beats B, X helps, Y fails) rests on >= 3 seeds at equal
budgets, is shown with its spread, and is asserted with a margin outside that spread. A sweep
too long for a notebook runs in `benchmarks/sweep.py`, is committed as `course_lib/sweeps/NAME.json`
with a fingerprint of the code that produced it, and the notebook draws it beside a live run that
must fall inside it. Numbers in prose are glued from the run. CONTRIBUTING.md, "The evidence
protocol", states the rules; the functions below enforce them and print what they compared.

    summarize(values)                        per-seed values -> Summary (mean, std, min, max, n)
    assert_better(a, b, higher_is_better=)   the worst seed of A beats the best seed of B by a margin
    assert_indistinguishable(a, b)           the two ranges overlap: no robust difference
    assert_within(live, committed, slack)    a live run falls inside a committed sweep's range
    fingerprint(recipe, modules, config)     a hash of the code and configuration behind a sweep
    load_sweep(name) -> Sweep                a committed sweep (package data, works when pip-installed)
    plot_sweep(sweep, metric, x, live=...)   the sweep's seeds, mean and min-max band, a live run on top
    plot_seeds({label: values})              per-seed dots, mean and min-max bars for a few models
    glue(name, value)                        a number for the prose ({glue:text}`name:.2f`), via myst-nb
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import math
import statistics
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

SCHEMA = "course_lib.sweep/1"
REQUIRED = ["name", "title", "recipe", "modules", "config", "points", "seeds", "metrics", "runs",
            "fingerprint", "command", "wall_seconds", "machine", "date"]
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

def _report(title, summaries, verdict):
    width = max(len(s.label) for s in summaries)
    lines = [title] + [f"  {s.label:<{width}}  {str(s).split(': ', 1)[1]}" for s in summaries] + [verdict]
    return "\n".join(lines)


def assert_better(a, b, *, higher_is_better, margin=0.0, metric="metric", label_a=None, label_b=None,
                  min_seeds=MIN_SEEDS):
    """Assert that A beats B with a margin outside the spread, and print the comparison.

    Rule: the WORST seed of A beats the BEST seed of B by at least `margin`:
        higher is better:  min(A) - max(B) >= margin
        lower is better:   min(B) - max(A) >= margin
    Both sides need >= min_seeds values. Prints the per-seed values, means, spreads, the gap and
    the margin; raises AssertionError with the same text when the claim does not hold.
    Returns None (so that a call on a cell's last line echoes nothing; the gap is in the print).
    """
    a, b = _as_summary(a, label_a, "a", "A"), _as_summary(b, label_b, "b", "B")
    _enough_seeds(a, "a", min_seeds)
    _enough_seeds(b, "b", min_seeds)
    if margin < 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    direction = "higher" if higher_is_better else "lower"
    if higher_is_better:
        worst_a, best_b, gap = a.min, b.max, a.min - b.max
    else:
        worst_a, best_b, gap = a.max, b.min, b.min - a.max
    ok = gap >= margin
    verdict = (f"  worst {a.label} {worst_a:.4g} vs best {b.label} {best_b:.4g}: gap {gap:.4g} "
               f"{'>=' if ok else '<'} margin {margin:.4g}  {'✓' if ok else '✗ NOT better'}")
    text = _report(f"{a.label} beats {b.label} on {metric} ({direction} is better)?", (a, b), verdict)
    print(text)
    if not ok:
        raise AssertionError(text)


def assert_indistinguishable(a, b, *, metric="metric", label_a=None, label_b=None, min_seeds=MIN_SEEDS):
    """Assert that A and B show no robust difference at this budget, and print the comparison.

    Rule: the min-max ranges of the seeds overlap, max(A) >= min(B) and max(B) >= min(A).
    Use it to write "no robust difference" honestly; it fails when one range lies wholly above
    the other (then assert_better is the claim to make). Both need >= min_seeds values.
    """
    a, b = _as_summary(a, label_a, "a", "A"), _as_summary(b, label_b, "b", "B")
    _enough_seeds(a, "a", min_seeds)
    _enough_seeds(b, "b", min_seeds)
    ok = a.max >= b.min and b.max >= a.min
    verdict = (f"  ranges [{a.min:.4g}, {a.max:.4g}] and [{b.min:.4g}, {b.max:.4g}] "
               + ("overlap  ✓ no robust difference" if ok else "do NOT overlap  ✗ one is ahead"))
    text = _report(f"{a.label} vs {b.label} on {metric}: indistinguishable?", (a, b), verdict)
    print(text)
    if not ok:
        raise AssertionError(text)


def assert_within(live, committed, slack, *, metric="metric", label="live run", min_seeds=MIN_SEEDS):
    """Assert that a live run falls inside a committed sweep's range, and print the comparison.

    Rule: every live value v satisfies  min(committed) - slack <= v <= max(committed) + slack.
    `live` is one number or several (one per live seed); `committed` holds >= min_seeds per-seed
    values (e.g. sweep.values("bpc", kind="lstm")). `slack` (absolute, >= 0, in the metric's
    unit) covers what differs legitimately between the two runs: thread count, machine, torch.
    """
    committed = _as_summary(committed, "committed", "committed")
    _enough_seeds(committed, "committed", min_seeds)
    live = _as_summary(_as_list(live), label, "live")
    if not slack >= 0:
        raise ValueError(f"slack must be a number >= 0, got {slack}")
    low, high = committed.min - slack, committed.max + slack
    outside = [v for v in live.values if not low <= v <= high]
    verdict = (f"  allowed [{low:.4g}, {high:.4g}] (committed range ± slack {slack:.4g}): "
               + ("✓ inside" if not outside else f"✗ OUTSIDE: {', '.join(f'{v:.4g}' for v in outside)}"))
    text = _report(f"{label} within the committed sweep on {metric}?", (committed, live), verdict)
    print(text)
    if outside:
        raise AssertionError(text)


# ---------------------------------------------------------------------------
# 3. Fingerprints: which code and configuration produced a sweep
# ---------------------------------------------------------------------------

def source_of(target):
    """The normalised source of 'package.module' (the whole file) or 'package.module:Name.attr'
    (one function, class or top-level assignment in it), read from the file on disk.

    Rule: what cannot change behaviour does not count. Comments, formatting and docstrings are
    dropped (the code is parsed and unparsed with `ast`), so fixing a docstring does not make a
    committed sweep stale; any change to the code does. A package counts by its __init__.py.
    """
    module, _, qualname = target.partition(":")
    spec = importlib.util.find_spec(module)
    if spec is None or not (spec.origin or "").endswith(".py"):
        raise ValueError(f"{target!r}: no Python source file found for module {module!r}")
    node = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    for name in filter(None, qualname.split(".")):
        node = _child(node, name, target)
    for part in ast.walk(node):  # blank every docstring
        body = getattr(part, "body", None)
        if (isinstance(part, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            body[0] = ast.Expr(ast.Constant(""))
    return ast.unparse(node)


def _child(node, name, target):
    for child in getattr(node, "body", []):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and child.name == name:
            return child
        targets = child.targets if isinstance(child, ast.Assign) else [getattr(child, "target", None)]
        if isinstance(child, (ast.Assign, ast.AnnAssign)) and any(
                isinstance(t, ast.Name) and t.id == name for t in targets):
            return child
    raise ValueError(f"{target!r}: no function, class or assignment named {name!r} in its module")


def fingerprint(recipe, modules=(), config=None):
    """A stable hash of what produced a result: the recipe function(s), the modules they depend
    on, and the JSON configuration.

    recipe: 'module:qualname' or a list of them (any importable function, class or constant);
    modules: module names counted whole (the course_lib modules the recipe uses);
    config: any JSON value. Returns 'sha256:' + 16 hex digits. Rule: recomputing it from the
    same three fields gives the same value on any machine, whatever the order of the lists,
    until the code (not its comments or docstrings) or the configuration changes.
    """
    targets = [recipe] if isinstance(recipe, str) else list(recipe)
    targets = sorted(set(targets) | set(modules))
    payload = {"config": config, "sources": {t: source_of(t) for t in targets}}
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


# ---------------------------------------------------------------------------
# 4. Committed sweeps
# ---------------------------------------------------------------------------

class Sweep:
    """A committed sweep: configuration, seeds, per-seed results, fingerprint, how to re-run it.

    The JSON fields (schema "course_lib.sweep/1") are attributes: name, title, description,
    recipe, modules, config, points, seeds, metrics, runs, fingerprint, command, wall_seconds,
    machine, date. Each run is {"point": {...}, "seed": s, "results": {metric: value},
    "seconds": t}. Select a configuration by its point's parameters:
    sweep.values("bpc", kind="lstm") -> per-seed values, in seed order.
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

    def expected_fingerprint(self):
        """The fingerprint recomputed now from the code on disk (equal to .fingerprint if fresh).
        Needs a checkout: the run function lives in benchmarks/ (put it on sys.path)."""
        return fingerprint(self.recipe, self.modules, {"config": self.config, "points": self.points})

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
