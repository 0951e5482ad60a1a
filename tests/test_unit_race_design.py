"""The race's two stages (benchmarks/bench_race.py), declared before any race run: a selection grid
of one seed that only chooses each model's (dropout, lr) on validation, then the comparison, 3
seeds at the chosen points at B and 2B, declared by rule once the grid's file is committed. The
sweeps here are made up (course_lib Sweep objects with invented values): nothing is trained."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_modern as bm  # noqa: E402 (benchmarks/, after the sys.path line)
import bench_race as br  # noqa: E402
import sweep_run as runner  # noqa: E402

from course_lib.pages.sweeps import SCHEMA, Sweep, read_sweep  # noqa: E402

B = {"bpe-2048": 3304, "chars": 12000}


def made_up(name, points, seeds, val_bpc, kernels=None):
    """A committed file's JSON (schema, every required field) with invented results:
    val_bpc(point, seed) -> the validation value; test_bpc = val_bpc + 0.01; cpu_seconds by seed."""
    runs = [
        {
            "point": p,
            "seed": s,
            "results": {"val_bpc": val_bpc(p, s), "test_bpc": val_bpc(p, s) + 0.01, "cpu_seconds": 100.0 + s},
            "seconds": 100.0 + s,
        }
        for p in points
        for s in seeds
    ]
    data = {
        "schema": SCHEMA,
        "name": name,
        "title": "made up",
        "config": bm.RUN_CONFIG,
        "points": points,
        "seeds": seeds,
        "metrics": bm.run_metrics(),
        "margins": br.RACE_MARGINS,
        "runs": runs,
        "kernels": kernels or {"cpu": "AMD", "threads": 1},
        "provenance": {},
        "command": f"python benchmarks/sweep.py {name}",
        "wall_seconds": 0.0,
        "machine": {},
        "date": "2026-12-07",
    }
    return json.loads(json.dumps(data))  # what a file holds


# The made-up grid: each model's best is one point, off the grid's corner for the GPT and the
# modern decoder, at the LSTM's highest rate and highest dropout (both edges).
BEST = {"gpt": (0.1, 2e-3), "modern": (0.0, 4e-3), "lstm": (0.2, 1e-2)}


def grid_val(point, seed):
    best = BEST[point["model"]] == (point["dropout"], point["lr"])
    return 1.5 if best else 2.0 + point["dropout"] + 100 * point["lr"]


def grid_of(tokenizer):
    return Sweep(made_up(br.RACE_NAMES[tokenizer] + "_grid", br.race_points(tokenizer), [0], grid_val))


def test_the_grid_has_27_points_one_seed_and_supports_no_claim():
    for tokenizer, name in br.RACE_NAMES.items():
        spec = br.race_grid_spec(tokenizer)
        keys = {(p["model"], p["dropout"], p["lr"]) for p in spec.points}
        print(name + "_grid:", len(spec.points), "points, seeds", spec.seeds)
        assert len(spec.points) == len(keys) == 27 and spec.seeds == [0]
        assert {p["steps"] for p in spec.points} == {B[tokenizer]} and spec.run is br.race_tokens_run
        assert spec.selection_for == name and spec.records == []
        assert spec.margins == {"race": 0.05, "still_improving": 0.01} and spec.config == bm.RUN_CONFIG
        assert "Declared before the run" in spec.description and "supports no" in spec.description


def test_the_final_points_are_each_models_lowest_validation_value_at_b_and_2b():
    grid = grid_of("bpe-2048")
    points = br.race_final_points(grid)
    print(points)
    assert [(p["model"], p["steps"]) for p in points] == [
        (m, steps) for m in br.RACE_MODELS for steps in (3304, 6608)
    ]
    for p in points:
        assert (p["dropout"], p["lr"]) == BEST[p["model"]] and p["tokenizer"] == "bpe-2048"
        assert p in grid.points or dict(p, steps=3304) in grid.points  # the grid's point, or it at 2B


def test_a_tie_goes_to_the_first_point_and_the_mean_over_seeds_decides():
    points = br.race_points("chars")
    tie = Sweep(made_up("race_chars_grid", points, [0], lambda p, s: 2.0))
    assert [p["lr"] for p in br.race_final_points(tie)[::2]] == [1e-3, 1e-3, 2.5e-3]
    # with two seeds, the mean chooses: one very good seed does not win against a better mean
    lucky = {"model": "gpt", "tokenizer": "chars", "dropout": 0.0, "lr": 4e-3, "steps": 12000}
    steady = dict(lucky, lr=2e-3)

    def val(p, s):
        return (1.0, 3.0)[s] if p == lucky else 1.8 if p == steady else 2.5

    chosen = br.race_final_points(Sweep(made_up("race_chars_grid", points, [0, 1], val)))
    assert chosen[0] == steady and chosen[1] == dict(steady, steps=24000)


def test_the_final_spec_is_declared_by_the_rule_and_refuses_another_grid():
    grid = grid_of("chars")
    spec = br.race_final_spec("chars", grid)
    print(spec.title, "\n", spec.description[-700:])
    assert spec.points == br.race_final_points(grid) and len(spec.points) == 6
    assert spec.seeds == [0, 1, 2] and spec.selection_for == "" and spec.run is br.race_tokens_run
    assert spec.margins == {"race": 0.05, "still_improving": 0.01} and spec.config == bm.RUN_CONFIG
    assert spec.records == [("test_bpc", "race_chars_test_bpc/{model}/dropout{dropout}/lr{lr}/steps{steps}")]
    assert len({spec.records[0][1].format(**p) for p in spec.points}) == 6  # one record a point
    assert "lstm dropout 0.2, lr 0.01 (lr 0.01 at the highest of its grid, dropout 0.2 at the highest" in (
        spec.description
    )
    assert "modern dropout 0, lr 0.004 (lr 0.004 at the highest of its grid);" in spec.description
    assert "gpt dropout 0.1, lr 0.002;" in spec.description  # inside the grid: no edge named
    for point in spec.points:
        runner.smoke_inputs(spec, point)
    with pytest.raises(ValueError, match="grid_sweep's points are not the bpe-2048 grid's"):
        br.race_final_spec("bpe-2048", grid)  # the characters' grid
    with pytest.raises(ValueError, match="tokenizer must be one of"):
        br.race_final_spec("words", grid)


def test_stage_2_is_declared_only_once_its_grid_is_committed(tmp_path):
    sweeps, planned = br.race_sweeps(tmp_path)
    assert sweeps == {} and sorted(planned) == ["race_bpe2048_grid", "race_chars_grid"]
    (tmp_path / "race_bpe2048_grid.json").write_text(json.dumps(grid_of("bpe-2048").data))
    sweeps, planned = br.race_sweeps(tmp_path)
    print("with the BPE grid committed: registered", sorted(sweeps), "planned", sorted(planned))
    assert sorted(sweeps) == ["race_bpe2048_grid"] and sorted(planned) == ["race_bpe2048", "race_chars_grid"]
    assert planned["race_bpe2048"].points == br.race_final_points(
        read_sweep(tmp_path / "race_bpe2048_grid.json")
    )
    assert sweeps["race_bpe2048_grid"].points == br.race_grid_spec("bpe-2048").points
    (tmp_path / "race_bpe2048.json").write_text("{}")  # stage 2 committed: it moves to SWEEPS
    sweeps, planned = br.race_sweeps(tmp_path)
    assert sorted(sweeps) == ["race_bpe2048", "race_bpe2048_grid"] and sorted(planned) == ["race_chars_grid"]


def test_the_module_registers_the_stages_as_the_committed_files_stand():
    for name in br.RACE_NAMES.values():
        grid_committed = (runner.SWEEP_DIR / f"{name}_grid.json").is_file()
        print(name, "grid committed:", grid_committed)
        assert (name + "_grid" in br.SWEEPS) == grid_committed
        assert (name + "_grid" in br.PLANNED) == (not grid_committed)
        assert (name in br.PLANNED or name in br.SWEEPS) == grid_committed
    assert br.SWEEP_DIR == runner.SWEEP_DIR  # where sweep.py writes a committed file


def final_of(tokenizer, val_b, val_2b, seeds=(0, 1, 2)):
    points = br.race_final_points(grid_of(tokenizer))
    val = lambda p, s: (val_b if p["steps"] == B[tokenizer] else val_2b)[s]  # noqa: E731
    return Sweep(made_up(br.RACE_NAMES[tokenizer], points, list(seeds), val))


def test_each_model_is_reported_at_its_better_budget_and_still_improving_is_named():
    gains = {
        "doubling pays": ((2.00, 2.02, 1.98), (1.97, 1.98, 1.96), 3304 * 2, True),  # gain 0.03
        "within the margin": ((2.00, 2.02, 1.98), (1.995, 2.01, 1.98), 3304 * 2, False),  # gain 0.005
        "doubling hurts": ((2.00, 2.02, 1.98), (2.03, 2.05, 2.01), 3304, False),
    }
    for case, (val_b, val_2b, steps, still) in gains.items():
        reported = br.race_reported_budget(final_of("bpe-2048", val_b, val_2b), "lstm")
        print(case, reported)
        assert reported["steps"] == steps and reported["still_improving"] is still, case
    with pytest.raises(ValueError, match="need 2"):
        br.race_reported_budget(grid_of("bpe-2048"), "gpt")


def test_seed_0_at_b_repeats_the_grids_run_bit_for_bit():
    grid = grid_of("chars")
    final = Sweep(made_up("race_chars", br.race_final_points(grid), [0, 1, 2], grid_val))
    assert br.race_repeat_differences(grid, final) == []
    data = final.data
    data["runs"][0]["results"]["cpu_seconds"] += 5.0  # a timing: not compared
    assert br.race_repeat_differences(grid, Sweep(data)) == []
    data["runs"][0]["results"]["test_bpc"] += 1e-12
    found = br.race_repeat_differences(grid, Sweep(data))
    print(found)
    assert len(found) == 1 and "seed 0: test_bpc" in found[0] and "'model': 'gpt'" in found[0]
    other = Sweep(made_up("race_chars", br.race_final_points(grid), [0, 1, 2], grid_val, {"cpu": "Intel"}))
    assert "made on other kernels" in br.race_repeat_differences(grid, other)[0]


def test_grid_edges_are_named():
    point = {"model": "lstm", "dropout": 0.2, "lr": 2.5e-3}
    assert br.race_grid_edges(point) == [
        "lr 0.0025 at the lowest of its grid",
        "dropout 0.2 at the highest of its grid",
    ]
    assert br.race_grid_edges({"model": "gpt", "dropout": 0.0, "lr": 2e-3}) == []  # 0: no lower dropout
    assert br.race_grid_edges({"model": "modern", "dropout": 0.1, "lr": 4e-3}) == [
        "lr 0.004 at the highest of its grid"
    ]


def test_the_costs_written_in_the_descriptions_are_the_two_stages():
    hours = {(t, s): br.race_cpu_hours(t, s) for t in br.RACE_STEPS for s in ("grid", "final")}
    print({k: round(v, 2) for k, v in hours.items()}, "total", round(sum(hours.values()), 2))
    # 9 runs at B a model either way: the grid's 9 points once, or 3 seeds x (B + 2B)
    assert hours["bpe-2048", "grid"] == pytest.approx(9 * (294 + 331 + 227) / 3600)
    assert hours["chars", "final"] == hours["chars", "grid"] == pytest.approx(9 * (1003 + 1100 + 646) / 3600)
    assert sum(hours.values()) == pytest.approx(18.0, abs=0.05)
    for tokenizer in br.RACE_STEPS:
        assert f"about {hours[tokenizer, 'grid']:.1f} CPU-hours" in br.race_grid_spec(tokenizer).description
        final = br.race_final_spec(tokenizer, grid_of(tokenizer))
        assert f"about {hours[tokenizer, 'final']:.1f} CPU-hours" in final.description
        assert "about 18.0 CPU-hours" in final.description
    with pytest.raises(ValueError, match="stage must be"):
        br.race_cpu_hours("chars", "both")
