"""modern_ablation's declared rule for a learning rate chosen at an edge of its grid
(benchmarks/bench_modern.py: ablation_edge_points, ablation_edges_spec, ablation_sweeps), tried on
made-up sweeps: which variants are extended, to which rate, and when the extension is declared."""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_modern as bm  # noqa: E402

from course_lib.pages.sweeps import SCHEMA, Sweep  # noqa: E402

SPEC = {**bm.PLANNED, **bm.SWEEPS}["modern_ablation"]


def made_up(best_rate):
    """modern_ablation's points and seeds with invented values: each variant's mean validation
    value is lowest at best_rate[variant] (seed 1 of every point 0.05 worse than the others)."""

    def val(p, s):
        return 1.5 + abs(p["lr"] - best_rate[p["model"]]) * 10 + 0.05 * (s == 1)

    runs = [
        {
            "point": p,
            "seed": s,
            "results": {"val_bpc": val(p, s), "test_bpc": val(p, s) + 0.01},
            "seconds": 1.0,
        }
        for p in SPEC.points
        for s in SPEC.seeds
    ]
    return {
        "schema": SCHEMA,
        "name": "modern_ablation",
        "title": "made up",
        "config": SPEC.config,
        "points": SPEC.points,
        "seeds": SPEC.seeds,
        "metrics": SPEC.metrics,
        "margins": SPEC.margins,
        "runs": runs,
        "kernels": {"cpu": "AMD", "threads": 1},
        "provenance": {},
        "command": "python benchmarks/sweep.py modern_ablation",
        "wall_seconds": 0.0,
        "machine": "made up",
        "date": "2026-12-07",
        "git_commit": "0" * 40,
        "description": "made up",
        "version": 1,
    }


def test_only_variants_chosen_at_an_edge_are_extended_one_factor_of_2_beyond_it():
    best = dict.fromkeys(bm.ABLATION, 0.004) | {"gpt2+swiglu": 2e-3, "llama": 8e-3}
    points = bm.ablation_edge_points(Sweep(made_up(best)))
    print(points)
    assert [(p["model"], p["lr"]) for p in points] == [("gpt2+swiglu", 1e-3), ("llama", 1.6e-2)]
    assert all(p["steps"] == bm.ABLATION_STEPS and p["tokenizer"] == "bpe-2048" for p in points)
    assert bm.ablation_edges_spec(Sweep(made_up(dict.fromkeys(bm.ABLATION, 0.004)))) is None


def test_the_extension_is_the_ablations_runs_at_the_new_rates_with_its_margin_and_seeds():
    spec = bm.ablation_edges_spec(Sweep(made_up(dict.fromkeys(bm.ABLATION, 0.004) | {"gpt2": 2e-3})))
    assert spec.run is bm.ablation_run and spec.config == SPEC.config and spec.margins == SPEC.margins
    assert spec.seeds == [0, 1, 2] and spec.metrics == SPEC.metrics and spec.selection_for == ""
    assert "Declared before the run" in spec.description and "CPU-hours" in spec.description
    assert "gpt2 at 0.001" in spec.title


def test_a_tie_goes_to_the_lower_rate_and_the_mean_over_seeds_decides():
    data = made_up(dict.fromkeys(bm.ABLATION, 0.004))
    tie = {(2e-3, 0): 1.75, (2e-3, 1): 1.25, (4e-3, 0): 1.5, (4e-3, 1): 1.5}  # (lr, seed) -> val_bpc
    for run in data["runs"]:  # gpt2: 0.002 and 0.004 tie on the mean; seed 0 alone would pick 0.004
        if run["point"]["model"] == "gpt2" and run["point"]["lr"] in (2e-3, 4e-3):
            run["results"]["val_bpc"] = tie.get((run["point"]["lr"], run["seed"]), 1.5)
    assert bm.chosen_rate(Sweep(data), "gpt2") == 2e-3


def test_the_extension_is_declared_once_the_ablation_is_committed(tmp_path):
    assert bm.ablation_sweeps(tmp_path) == ({}, {})
    (tmp_path / "modern_ablation.json").write_text(json.dumps(made_up(dict.fromkeys(bm.ABLATION, 0.004))))
    assert bm.ablation_sweeps(tmp_path) == ({}, {})  # no edge: nothing to declare
    (tmp_path / "modern_ablation.json").write_text(
        json.dumps(made_up(dict.fromkeys(bm.ABLATION, 0.004) | {"gpt2+swiglu": 2e-3}))
    )
    sweeps, planned = bm.ablation_sweeps(tmp_path)
    assert sweeps == {} and [p["model"] for p in planned["modern_ablation_edges"].points] == ["gpt2+swiglu"]
    (tmp_path / "modern_ablation_edges.json").write_text("{}")
    sweeps, planned = bm.ablation_sweeps(tmp_path)
    assert planned == {} and list(sweeps) == ["modern_ablation_edges"]
