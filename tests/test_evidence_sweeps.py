"""Committed sweeps: fresh (their fingerprint matches the code now), re-runnable, summarised
into results.json with their spread, and shipped as package data."""

import importlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import sweep as runner  # noqa: E402 (benchmarks/sweep.py, after the sys.path line)
from common import SweepSpec, markdown_table, record, sweep_records  # noqa: E402

from course_lib.evidence import SCHEMA, committed_sweeps, load_sweep, read_sweep  # noqa: E402


def test_every_committed_and_registered_sweep_is_fresh():
    """For each course_lib/sweeps/NAME.json: the recorded fingerprint equals the one recomputed
    now from the code on disk, and a SWEEPS entry in benchmarks/bench_*.py re-runs it; each
    registered sweep has committed data."""
    found = runner.all_problems()
    names = sorted(set(committed_sweeps()) | set(runner.registered_sweeps()))
    print(f"checked {len(names)} sweep(s): {', '.join(names) or 'none committed yet'}")
    assert not found, "\n".join(found)


def test_committed_sweeps_follow_the_protocol():
    for name in committed_sweeps():
        sweep = load_sweep(name)
        assert len(sweep.seeds) >= 3, f"{name}: {len(sweep.seeds)} seeds; the protocol needs >= 3"
        for point in sweep.points:
            seeds = sorted(r["seed"] for r in sweep.runs if r["point"] == point)
            assert seeds == sorted(sweep.seeds), f"{name}: {point} has seeds {seeds}, not {sweep.seeds}"
        assert sweep.command.startswith(f"python benchmarks/sweep.py {name}")


# --- a synthetic recipe, run by the real runner in a temporary folder ------------

RECIPE = '''
"""A synthetic recipe: a 'model' whose held-out error falls with its budget."""


def train_toy(steps, lr, seed):
    """The recipe."""
    noise = ((seed * 7919) % 13) / 1000
    return 1.0 / (1.0 + lr * steps) + noise


def run(point, seed, config):
    return {"error": train_toy(point["steps"], config["lr"], seed)}
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """A recipe module in tmp_path (importable), its spec, and the folder the sweep is written to."""
    name = f"toy_recipe_{abs(hash(str(tmp_path))) % 10**8}"
    path = tmp_path / f"{name}.py"
    path.write_text(RECIPE)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module(name)
    spec = SweepSpec(
        title="Toy",
        run=module.run,
        points=[{"steps": 10}, {"steps": 100}],
        config={"lr": 0.1},
        recipe=[f"{name}:train_toy"],
        modules=[],
        metrics={"error": {"unit": "fraction", "higher_is_better": False}},
        records=[("error", "toy_error/{steps}")],
    )
    out = tmp_path / "sweeps"
    yield spec, path, out
    sys.modules.pop(name, None)


def test_runner_writes_every_field_of_the_schema(toy, capsys):
    spec, _, out = toy
    sweep = runner.run_sweep("toy", spec, [0, 1, 2], out_dir=out)
    data = json.loads((out / "toy.json").read_text())
    assert data["schema"] == SCHEMA and data["name"] == "toy" and data["seeds"] == [0, 1, 2]
    assert data["config"] == {"lr": 0.1} and data["points"] == [{"steps": 10}, {"steps": 100}]
    assert data["recipe"] == sorted([spec.recipe[0], f"{spec.run.__module__}:run"])
    assert len(data["runs"]) == 6 and all(r["seconds"] >= 0 for r in data["runs"])
    assert data["command"] == "python benchmarks/sweep.py toy"
    assert {"cpu_count", "torch", "python", "platform", "torch_threads"} <= set(data["machine"])
    assert data["date"][:2] == "20" and data["wall_seconds"] >= 0
    assert sweep.values("error", steps=100) == pytest.approx([1 / 11, 1 / 11 + 0.002, 1 / 11 + 0.004])
    assert "seed 2: error" in capsys.readouterr().out
    assert runner.problems("toy", spec, out) == []


def test_other_seeds_go_into_the_command(toy):
    spec, _, out = toy
    assert (
        runner.run_sweep("toy", spec, [3, 4, 5], out_dir=out).command
        == "python benchmarks/sweep.py toy --seeds 3 4 5"
    )


def test_a_changed_recipe_makes_the_committed_sweep_stale(toy):
    spec, path, out = toy
    runner.run_sweep("toy", spec, [0, 1, 2], out_dir=out)
    path.write_text(RECIPE.replace('"""The recipe."""', '"""The recipe, reworded."""'))
    assert runner.problems("toy", spec, out) == []  # a docstring is not the recipe
    path.write_text(RECIPE.replace("1.0 / (1.0 + lr * steps)", "1.0 / (1.0 + 2 * lr * steps)"))
    found = runner.problems("toy", spec, out)
    assert len(found) == 1 and "the code changed since the sweep ran" in found[0]
    assert "re-run: python benchmarks/sweep.py toy" in found[0]


def test_a_changed_run_function_or_spec_makes_it_stale(toy):
    spec, path, out = toy
    runner.run_sweep("toy", spec, [0, 1, 2], out_dir=out)
    path.write_text(RECIPE.replace('{"error": train_toy', '{"error": 0.5 * train_toy'))
    assert "the code changed" in runner.problems("toy", spec, out)[0]
    path.write_text(RECIPE)
    spec.config = {"lr": 0.2}
    assert (
        "the registered spec (recipe, modules, config or points) changed"
        in runner.problems("toy", spec, out)[0]
    )
    spec.config = {"lr": 0.1}
    spec.points = spec.points + [{"steps": 1000}]
    assert "changed since the sweep ran" in runner.problems("toy", spec, out)[0]


def test_a_hand_edited_sweep_file_is_caught(toy):
    spec, _, out = toy
    runner.run_sweep("toy", spec, [0, 1, 2], out_dir=out)
    data = json.loads((out / "toy.json").read_text())
    data["config"]["lr"] = 0.3
    (out / "toy.json").write_text(json.dumps(data))
    assert "or the file was edited" in runner.problems("toy", spec, out)[0]


def test_missing_and_orphaned_sweeps_are_problems(toy):
    spec, _, out = toy
    assert "registered but no committed data" in runner.problems("toy", spec, out)[0]
    runner.run_sweep("toy", spec, [0, 1, 2], out_dir=out)
    assert "no SWEEPS entry" in runner.problems("toy", None, out)[0]


def test_sweep_records_carry_mean_and_spread_for_results_json(toy):
    spec, _, out = toy
    sweep = runner.run_sweep("toy", spec, [0, 1, 2], out_dir=out)
    records = sweep_records(spec, sweep)
    assert [r["name"] for r in records] == ["toy_error/10", "toy_error/100"]
    r = records[1]
    assert r["value"] == pytest.approx(sum(sweep.values("error", steps=100)) / 3)
    assert (r["min"], r["max"], r["n"], r["sweep"], r["unit"]) == (
        1 / 11,
        pytest.approx(1 / 11 + 0.004),
        3,
        "toy",
        "fraction",
    )
    assert {"name", "value", "unit", "baseline", "ratio"} <= set(r)  # the old record format, extended
    table = markdown_table(records)
    assert (
        "| spread over seeds |" in table
        and "| toy_error/100 | 0.0929 | fraction |  |  | ± 0.002 [0.0909, 0.0949], n=3 |" in table
    )
    assert ", n=3 |" in table


def test_tables_without_sweeps_keep_their_format():
    table = markdown_table([record("x_ms", 31.46, "ms", baseline=29.5)])
    assert table.splitlines() == [
        "| name | value | unit | baseline | ratio |",
        "|---|---:|---|---:|---:|",
        "| x_ms | 31.5 | ms | 29.5 | 1.07 |",
    ]


def test_run_py_lists_a_committed_sweep_section(monkeypatch, toy):
    spec, _, out = toy
    runner.run_sweep("toy", spec, [0, 1, 2], out_dir=out)
    import run  # benchmarks/run.py

    monkeypatch.setattr(run, "SWEEP_DIR", out)
    monkeypatch.setattr(run, "problems", lambda name, spec: runner.problems(name, spec, out))

    class Args:
        failed = False

    records = run.committed_sweep("toy", spec)(Args)
    assert [r["name"] for r in records] == ["toy_error/10", "toy_error/100"] and not Args.failed
    spec.config = {"lr": 0.5}  # now stale: reported, and the exit status becomes 1
    run.committed_sweep("toy", spec)(Args)
    assert Args.failed


@pytest.mark.slow  # --list imports every sweep's module and fingerprints its code (seconds)
def test_runner_command_line_rejects_bad_requests(capsys):
    with pytest.raises(SystemExit):
        runner.main(["no_such_sweep"])
    assert "unknown sweep 'no_such_sweep'" in capsys.readouterr().err
    assert runner.main(["--list"]) == 0


# --- package data: sweeps reach a pip-installed course_lib (Colab) ---------------


@pytest.mark.slow
def test_sweeps_ship_in_the_wheel_and_load_from_it(tmp_path):
    """Build the wheel from a copy of the project with one sweep in it, then load that sweep
    with load_sweep() from the wheel alone (a zip on sys.path, no checkout)."""
    src = tmp_path / "src"
    shutil.copytree(ROOT / "course_lib", src / "course_lib", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ["pyproject.toml", "README.md"]:
        shutil.copy(ROOT / name, src / name)
    data = {
        "schema": SCHEMA,
        "name": "shipped",
        "title": "t",
        "recipe": [],
        "modules": [],
        "config": {},
        "points": [{"k": 1}],
        "seeds": [0, 1, 2],
        "metrics": {"m": {}},
        "fingerprint": "",
        "command": "",
        "wall_seconds": 0,
        "machine": {},
        "date": "",
        "runs": [{"point": {"k": 1}, "seed": s, "results": {"m": 0.5 + s}, "seconds": 0} for s in range(3)],
    }
    (src / "course_lib" / "sweeps").mkdir(exist_ok=True)
    (src / "course_lib" / "sweeps" / "shipped.json").write_text(json.dumps(data))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path / "dist"),
            str(src),
        ],
        check=True,
        capture_output=True,
    )
    wheel = next((tmp_path / "dist").glob("course_lib-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "course_lib/sweeps/shipped.json" in names and "course_lib/evidence.py" in names
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import course_lib.evidence as e; "
        "assert e.__file__.startswith(sys.argv[1]), e.__file__; "
        "print('shipped' in e.committed_sweeps(), e.load_sweep('shipped').values('m', k=1))"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", code, str(wheel)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True [0.5, 1.5, 2.5]"  # beside the book's own committed sweeps


def test_read_sweep_of_a_committed_file_equals_load_sweep():
    for name in committed_sweeps():
        assert read_sweep(ROOT / "course_lib" / "sweeps" / f"{name}.json").data == load_sweep(name).data
