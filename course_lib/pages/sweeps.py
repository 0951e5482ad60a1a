"""Committed sweeps: load one, the CPU kernels it ran on, a page's live run against it, its figure.

A sweep too long for a notebook runs in `benchmarks/`, is committed as `course_lib/sweeps/NAME.json`,
and the notebook draws it beside its own live run.

    load_sweep(name) -> Sweep                a committed sweep (package data, works when pip-installed)
    check_live(live, sweep, metric, ...)     this page's run against the sweep's runs of its seeds
    kernel_set(), same_kernels(recorded)     which CPU kernels torch computes with here
    plot_sweep(sweep, metric, x, live=...)   the sweep's seeds, mean and min-max band, a live run on top

Why a live run can differ from its sweep: torch picks its CPU kernels by processor (AVX-512,
AVX2, ARM, a GPU), and each adds floats in its own order. Training is chaotic, so after a few
hundred steps two such runs can end apart. On the kernels the sweep was made with, the page's run
reproduces the sweep's run of the same seed exactly; elsewhere it is one more sample, compared
with the sweep's spread.
"""

from __future__ import annotations

import json
import os
import platform
from importlib import resources
from pathlib import Path

from .evidence import _as_list, summarize

SCHEMA = "course_lib.sweep/2"
REQUIRED = ["name", "title", "config", "points", "seeds", "metrics", "margins", "runs", "kernels",
            "provenance", "command", "wall_seconds", "machine", "date"]

# ---------------------------------------------------------------------------
# 1. Live runs, and the CPU kernels they ran on
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
# 2. Committed sweeps
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
# 3. The figure: seeds, spread, and a live run on top
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
