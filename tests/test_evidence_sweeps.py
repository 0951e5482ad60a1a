"""Committed sweeps: made on the pinned kernels, stale exactly when the code or data they ran
changed (named), re-blessed when a refactor changes no number, summarised into results.json
with their spread, and shipped as package data."""

import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import kernels  # noqa: E402 (benchmarks/, after the sys.path line)
import provenance  # noqa: E402
import sweep as sweep_cli  # noqa: E402
import sweep_rebless  # noqa: E402
import sweep_run as runner  # noqa: E402
from common import SweepSpec, markdown_table, record, sweep_records  # noqa: E402

from course_lib.pages.sweeps import (  # noqa: E402
    SCHEMA,
    committed_sweeps,
    cpu_vendor,
    kernel_set,
    load_sweep,
    read_sweep,
)

# --- the committed sweeps -----------------------------------------------------


def test_every_committed_and_registered_sweep_is_fresh():
    """No recorded definition, data or spec field of a committed sweep changed since it ran;
    each registered sweep has committed data and each committed file a registered spec."""
    found = runner.all_problems()
    names = sorted(set(committed_sweeps()) | set(runner.registered_sweeps()))
    print(f"checked {len(names)} sweep(s): {', '.join(names)}")
    assert not found, "\n".join(found)


def test_a_planned_sweep_is_not_registered_and_has_no_data_yet():
    """PLANNED holds designs not run yet: none is also registered, and none has committed data
    (once run, its spec moves to SWEEPS, where the freshness rules apply)."""
    planned, registered = runner.planned_sweeps(), runner.registered_sweeps()
    print("planned:", sorted(planned))
    assert not set(planned) & set(registered)
    assert not set(planned) & set(committed_sweeps()), "run and committed: move it to SWEEPS"
    assert all(isinstance(spec, SweepSpec) and spec.margins for spec in planned.values())


def test_committed_sweeps_follow_the_protocol():
    pinned = kernels.pinned()
    expected = {
        "aten": pinned["ATEN_CPU_CAPABILITY"].upper(),
        "mkl": pinned["MKL_CBWR"],
        "onednn": pinned["ONEDNN_MAX_CPU_ISA"],
    }
    specs = runner.registered_sweeps()
    for name in committed_sweeps():
        sweep = load_sweep(name)
        expected["threads"] = runner.run_threads(sweep.config)  # one, unless its config names more
        if not getattr(specs.get(name), "selection_for", ""):  # selection-only: the test below
            assert len(sweep.seeds) >= 3, f"{name}: {len(sweep.seeds)} seeds; the protocol needs >= 3"
        for point in sweep.points:
            seeds = sorted(r["seed"] for r in sweep.runs if r["point"] == point)
            assert seeds == sorted(sweep.seeds), f"{name}: {point} has seeds {seeds}, not {sweep.seeds}"
        assert sweep.command.startswith(f"python benchmarks/sweep.py {name}")
        assert {k: sweep.kernels[k] for k in expected} == expected, f"{name}: kernels {sweep.kernels}"
        canary = sweep.provenance["canary"]
        assert len(canary) == len(sweep.points) and all(c["losses"] for c in canary), name
        assert any(k.startswith("course_lib/") for k in sweep.provenance["definitions"]), name


LOADS = re.compile(r"""(?:load|read)_sweep\(\s*f?\\?["']([^"'\\]+)""")  # also in a notebook's JSON


def test_a_selection_only_sweep_supports_no_claim():
    """A sweep whose spec names `selection_for` (common.SweepSpec) may run fewer than 3 seeds
    because its only use is choosing the points of the sweep it names: it writes no records
    (results.json), no chapter, page or explorer loads its file, and the sweep it names, once
    declared, reports with >= 3 seeds."""
    specs = {**runner.planned_sweeps(), **runner.registered_sweeps()}
    selections = {name: spec.selection_for for name, spec in specs.items() if spec.selection_for}
    print("selection-only sweeps, and the sweeps they choose for:", selections)
    sources = [
        *(ROOT / "book").rglob("*.ipynb"),
        *(ROOT / "book").rglob("*.md"),
        *(ROOT / "course_lib").rglob("*.py"),
    ]
    loaded = {
        (path.relative_to(ROOT), name)
        for path in sources
        for name in LOADS.findall(path.read_text(encoding="utf-8"))
    }
    for name, target in selections.items():
        assert specs[name].records == [], f"{name}: a selection-only sweep writes no records"
        assert target != name, name
        if name in runner.registered_sweeps():  # committed: the sweep it chooses for is declared
            assert target in specs, f"{name} is committed; declare {target}, the sweep it chooses for"
        if target in specs:
            assert len(specs[target].seeds) >= 3, f"{target}, chosen by {name}: fewer than 3 seeds"
            assert not specs[target].selection_for, f"{target}: the sweep {name} chooses for makes claims"
        for path, pattern in loaded:
            regex = re.sub(r"\\\{[^}]*\\\}", r"\\w+", re.escape(pattern))  # an f-string's fields
            assert not re.fullmatch(regex, name), f"{path} loads {name!r}, a selection-only sweep"


def test_a_sweep_that_reads_the_corpus_records_its_hash():
    """The corpus loader is cached in some run modules: each smoke runs in a fresh process, so
    every sweep that trains on the text records both the loader and the text's hash."""
    readers = [
        n
        for n in committed_sweeps()
        if "course_lib/data.py:load_text" in load_sweep(n).provenance["definitions"]
    ]
    print("sweeps that read pydoc_data:", readers)
    for name in readers:
        assert "pydoc_data.topics" in load_sweep(name).provenance["data"], name
    for name in committed_sweeps():
        uses_text = "course_lib/data.py:char_corpus" in load_sweep(name).provenance["definitions"]
        assert not uses_text or name in readers, name


# Definitions a run function names but no committed sweep executes (a branch never taken); each
# is checked to be missing from every trace, so the list stays exact.
NOT_TAKEN = {
    "course_lib/train.py:_cycle": "fit's path for an iterable of batches; the sweeps pass a function",
    "course_lib/_checks.py:shape_of": "formats error messages (f-strings built just before a raise)",
    "course_lib/train.py:stream_batches": "train_lm's stateful path: no committed sweep trains statefully",
    "course_lib/train.py:_carried_state_loss": "train_lm's stateful path, as stream_batches",
}
# Issue 40: a public entry point checks its inputs, then runs the unchecked arithmetic, which is
# what the models call inside; the sweeps run whole models, so the checked entries of the inner
# parts and the checks only they make are reachable by name but never taken.
CHECKED_ENTRIES = (
    "course_lib/rnn.py:_Cell.forward",
    "course_lib/rnn.py:_Cell._checked_state",
    "course_lib/seq2seq.py:Encoder.forward",
    "course_lib/transformer.py:Decoder.forward",
    "course_lib/transformer.py:EncoderLayer.forward",
    "course_lib/_checks.py:check_key_length",
    "course_lib/_checks.py:check_last_dim",
    "course_lib/_checks.py:check_local_inputs",
    "course_lib/_checks.py:check_location_inputs",
    "course_lib/_checks.py:check_rnn_state",
    "course_lib/_checks.py:check_score_inputs",
)
NOT_TAKEN.update(
    dict.fromkeys(
        CHECKED_ENTRIES,
        "a checked entry point (or its check) that a learner calls; the models run the unchecked path inside",
    )
)


def test_the_traces_cover_what_the_run_functions_can_reach():
    """Statically, each run function names (through functions, constructors and self.method
    calls of course_lib/ and benchmarks/) a set of definitions; every one of them must appear in
    the trace of some committed sweep, except a branch that no sweep takes (NOT_TAKEN, with its
    reason): the tracer sees every kind of definition the runs can execute. (Per sweep the
    static set is larger than the trace: a sweep's points select branches, e.g. the copy sweeps
    without attention never build a score function, and their records rightly leave it out.)"""
    specs = runner.registered_sweeps()
    traced = set().union(*(load_sweep(n).provenance["definitions"] for n in committed_sweeps()))
    reach = set()
    for name in committed_sweeps():
        run = specs[name].run
        key = f"{provenance._rel(run.__code__.co_filename)}:{run.__qualname__}"
        missing = provenance.reachable(key) - traced
        print(f"{name}: {len(provenance.reachable(key))} reachable, traced by no sweep: {sorted(missing)}")
        reach |= provenance.reachable(key)
    missing = reach - traced
    assert missing <= set(NOT_TAKEN), f"reachable, traced by no sweep: {sorted(missing - set(NOT_TAKEN))}"
    assert missing == set(NOT_TAKEN), f"no longer needed: {sorted(set(NOT_TAKEN) - missing)}"


# Committed sweeps with cheap smoke runs. MKL computes differently on Intel and AMD processors
# even with MKL_CBWR pinned, so the canary compared is that of sweeps made on this CPU's vendor.
CANARY_CANDIDATES = (
    "heads_three_lookups",
    "positional_extrapolation",
    "bottleneck_plateau_h64",
    "bottleneck_plateau_h32",
    "paper_recipe_ablation",
)


@pytest.mark.slow  # two fresh processes, one smoke run each (about 20 s)
def test_a_committed_canary_is_reproduced_bit_for_bit():
    """On the pinned kernels (sweep.py sets them before torch starts, whatever the environment
    says), a few dozen training steps reproduce the committed losses and results exactly."""
    vendor = cpu_vendor()
    names = [
        n for n in CANARY_CANDIDATES if n in committed_sweeps() and load_sweep(n).kernels.get("cpu") == vendor
    ][:2]
    assert names, (
        f"no committed sweep among {CANARY_CANDIDATES} was made on a {vendor} CPU, so nothing "
        "here can be compared bit for bit: re-run one (python benchmarks/sweep.py NAME) on this CPU"
    )
    env = dict(os.environ, ATEN_CPU_CAPABILITY="default", MKL_CBWR="COMPATIBLE")
    out = subprocess.run(
        [sys.executable, "benchmarks/sweep.py", "--canary", *names],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    print(f"CPU vendor {vendor}; canaries of {names}")
    print(out.stdout, out.stderr[-2000:])
    assert out.returncode == 0 and f"identical canaries: {', '.join(names)}" in out.stdout


# --- the runner on a synthetic recipe, in a temporary repository -------------------

RECIPE = '''
"""A synthetic recipe: a linear model trained by gradient descent on generated data."""

import torch

SCALE = 2.0
UNUSED = 5.0


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, generator=g)
    return x, SCALE * x.sum(1, keepdim=True)


def train_toy(steps, lr, seed):
    """The recipe."""
    torch.manual_seed(seed)
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    x, y = make_data(64, seed)
    for _ in range(steps):
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss.item()


def run(point, seed, config):
    return {"error": train_toy(point["steps"], config["lr"], seed)}
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """A recipe module in tmp_path/benchmarks (a repository of its own for provenance), its
    spec, and the folder the sweep is written to."""
    (tmp_path / "benchmarks").mkdir()
    name = f"toy_recipe_{abs(hash(str(tmp_path))) % 10**8}"
    path = tmp_path / "benchmarks" / f"{name}.py"
    path.write_text(RECIPE)
    monkeypatch.setattr(provenance, "ROOT", tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path / "benchmarks"))
    module = importlib.import_module(name)
    spec = SweepSpec(
        title="Toy",
        run=module.run,
        points=[{"steps": 30}, {"steps": 60}],
        config={"lr": 0.1},
        metrics={"error": {"unit": "MSE", "higher_is_better": False}},
        smoke={"steps": 5},
        margins={"error": 0.01},
        records=[("error", "toy_error/{steps}")],
    )
    out = tmp_path / "sweeps"
    yield spec, path, out, f"benchmarks/{name}.py"
    sys.modules.pop(name, None)


def edit(path, old, new, spec=None):
    """Replace `old` by `new` in the recipe file; with `spec`, re-import it (as a fresh process
    would: sweep.py runs each registered sweep's smoke in one) and point spec.run at it."""
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new))
    if spec is not None:
        spec.run = importlib.reload(sys.modules[spec.run.__module__]).run


def test_runner_records_kernels_definitions_and_canary(toy, capsys):
    spec, _, out, rel = toy
    sweep = runner.run_sweep("toy", spec, [0, 1, 2], out_dir=out)
    data = json.loads((out / "toy.json").read_text())
    assert data["schema"] == SCHEMA and data["seeds"] == [0, 1, 2] and len(data["runs"]) == 6
    assert data["margins"] == {"error": 0.01} and data["version"] == 1
    assert data["kernels"] == dict(kernel_set(), threads=1)
    assert sorted(data["provenance"]["definitions"]) == [
        f"{rel}:{n}" for n in ("SCALE", "make_data", "run", "train_toy")
    ]
    canary = data["provenance"]["canary"]
    assert [len(c["losses"]) for c in canary] == [5, 5] and canary[0]["losses"][0] > canary[0]["losses"][-1]
    assert sweep.values("error", steps=60)[0] == data["runs"][3]["results"]["error"]
    assert "seed 2: error" in capsys.readouterr().out
    assert runner.problems("toy", spec, out) == []


def test_a_sweep_whose_config_names_threads_runs_and_records_them(toy):
    """config["threads"] = 2 (a page that trains on two cores): every run computes on two torch
    threads and the file records that kernel set; the smoke runs keep one thread."""
    spec, path, out, _ = toy
    edit(path, 'return {"error": train_toy', 'return {"threads": torch.get_num_threads(), "error": train_toy')
    spec.run = importlib.reload(sys.modules[spec.run.__module__]).run
    spec.metrics = dict(spec.metrics, threads={"unit": "threads", "higher_is_better": False})
    spec.config = {"lr": 0.1, "threads": 2}
    runner.run_sweep("toy", spec, [0, 1, 2], out_dir=out)
    data = json.loads((out / "toy.json").read_text())
    print("threads per run:", [r["results"]["threads"] for r in data["runs"]], "kernels:", data["kernels"])
    assert [r["results"]["threads"] for r in data["runs"]] == [2.0] * 6
    assert data["kernels"] == dict(kernel_set(), threads=2) and data["machine"]["torch_threads"] == 2
    assert [c["results"]["threads"] for c in data["provenance"]["canary"]] == [1.0, 1.0]


def test_only_a_change_to_what_ran_makes_it_stale(toy):
    spec, path, out, rel = toy
    runner.run_sweep("toy", spec, [0, 1, 2], out_dir=out)
    edit(path, '"""The recipe."""', '"""The recipe, reworded."""\n    # and a comment')
    edit(path, "UNUSED = 5.0", "UNUSED = 6.0\n\n\ndef helper():\n    return 1")
    edit(path, "def make_data(n, seed):", "def make_data(n: int, seed: int | None) -> tuple:")
    # docstring, comment, unused constant and helper, and annotations (never evaluated)
    assert runner.problems("toy", spec, out) == []
    edit(path, "x = torch.randn(n, 3, generator=g)", "x = torch.rand(n, 3, generator=g)")
    found = runner.problems("toy", spec, out)
    assert len(found) == 1 and f"code it ran changed: {rel}:make_data (changed)" in found[0]
    edit(path, "x = torch.rand(n, 3, generator=g)", "x = torch.randn(n, 3, generator=g)")
    edit(path, "SCALE = 2.0", "SCALE = 2.5")  # a constant that a function which ran reads
    assert f"{rel}:SCALE (changed)" in runner.problems("toy", spec, out)[0]


def test_a_spec_change_makes_it_stale_and_says_which(toy):
    spec, _, out, _ = toy
    runner.run_sweep("toy", spec, [0, 1, 2], out_dir=out)
    for key, value in [
        ("config", {"lr": 0.2}),
        ("points", [{"steps": 30}]),
        ("margins", {"error": 0.02}),
        ("version", 2),
    ]:
        before = getattr(spec, key)
        setattr(spec, key, value)
        assert f"its spec's {key} changed" in runner.problems("toy", spec, out)[0], key
        setattr(spec, key, before)
    assert runner.problems("toy", spec, out) == []


def test_rebless_keeps_a_refactor_that_changes_no_number(toy):
    spec, path, out, rel = toy
    runner.run_sweep("toy", spec, [0, 1, 2], out_dir=out)
    edit(
        path,
        "opt = torch.optim.SGD(model.parameters(), lr=lr)",
        "optimizer = torch.optim.SGD(model.parameters(), lr=lr)",
    )
    edit(path, "opt.zero_grad()", "optimizer.zero_grad()")
    edit(path, "opt.step()", "optimizer.step()")
    assert "train_toy (changed)" in runner.problems("toy", spec, out)[0]
    kept, why = sweep_rebless.rebless("toy", spec, out)
    assert kept and why == f"{rel}:train_toy (changed)"
    assert runner.problems("toy", spec, out) == []
    note = read_sweep(out / "toy.json").provenance["reblessed"][0]
    assert note["changed"] == [f"{rel}:train_toy (changed)"] and note["canary"] == "identical"


def test_rebless_refuses_a_change_of_the_numbers(toy):
    spec, path, out, _ = toy
    runner.run_sweep("toy", spec, [0, 1, 2], out_dir=out)
    edit(path, "loss = ((model(x) - y) ** 2).mean()", "loss = (model(x) - y).abs().mean()", spec)
    kept, why = sweep_rebless.rebless("toy", spec, out)
    assert not kept and "the canary changed" in why
    assert "train_toy (changed)" in runner.problems("toy", spec, out)[0]  # still stale


def test_changed_data_makes_it_stale(toy, monkeypatch, tmp_path):
    spec, _, out, rel = toy
    text = tmp_path / "corpus.txt"
    text.write_text("some text")
    monkeypatch.setattr(provenance, "DATA_SOURCES", {f"{rel}:make_data": ("toy corpus", text.read_text)})
    runner.run_sweep("toy", spec, [0, 1, 2], out_dir=out)
    assert list(read_sweep(out / "toy.json").provenance["data"]) == ["toy corpus"]
    text.write_text("other text")
    assert "the data toy corpus changed" in runner.problems("toy", spec, out)[0]


def test_missing_orphaned_and_old_files_are_problems(toy):
    spec, _, out, _ = toy
    assert "registered but no committed data" in runner.problems("toy", spec, out)[0]
    runner.run_sweep("toy", spec, [0, 1, 2], out_dir=out)
    assert "no SWEEPS entry" in runner.problems("toy", None, out)[0]
    data = json.loads((out / "toy.json").read_text())
    (out / "toy.json").write_text(json.dumps(dict(data, schema="course_lib.sweep/1")))
    assert "not course_lib.sweep/2" in runner.problems("toy", spec, out)[0]


TRACED = '''
"""What the tracer must see: nested functions, lambdas, comprehensions, a dataclass built by its
generated __init__, a property, a generator, a class attribute, a constant read through an import."""

from dataclasses import dataclass

import torch

WIDTH = 3


@dataclass
class Config:
    width: int = WIDTH
    scale: float = 0.5


class Model(torch.nn.Module):
    bias_init = 0.1

    def __init__(self, config):
        super().__init__()
        self.layer = torch.nn.Linear(config.width, 1)
        torch.nn.init.constant_(self.layer.bias, self.bias_init)

    @property
    def size(self):
        return sum(p.numel() for p in self.parameters())

    def forward(self, x):
        square = lambda t: t * t  # noqa: E731
        return square(self.layer(x))


def batches(n):
    for i in range(n):
        yield torch.full((2, WIDTH), float(i))


def never_called():
    return 0


def run(point, seed, config):
    def loss_of(model, x):
        return model(x).mean()

    model = Model(Config())
    losses = [loss_of(model, x) for x in batches(point["n"])]
    losses[-1].backward()
    return {"size": model.size}
'''


def test_the_tracer_sees_every_kind_of_definition(tmp_path, monkeypatch):
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "traced_toy.py").write_text(TRACED)
    monkeypatch.setattr(provenance, "ROOT", tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path / "benchmarks"))
    module = importlib.import_module("traced_toy")
    try:
        ran = provenance.trace_run(module.run, {"n": 3}, 0, {})
    finally:
        sys.modules.pop("traced_toy", None)
    names = sorted(k.split(":", 1)[1] for k in ran.definitions)
    assert names == [
        "Config",
        "Model",
        "Model.__init__",
        "Model.forward",
        "Model.size",
        "WIDTH",
        "batches",
        "run",
    ]
    assert ran.result == {"size": 4} and len(ran.losses) == 1


# --- records and tables ---------------------------------------------------------


def test_sweep_records_carry_mean_and_spread_for_results_json(toy):
    spec, _, out, _ = toy
    sweep = runner.run_sweep("toy", spec, [0, 1, 2], out_dir=out)
    records = sweep_records(spec, sweep)
    assert [r["name"] for r in records] == ["toy_error/30", "toy_error/60"]
    r = records[1]
    values = sweep.values("error", steps=60)
    assert r["value"] == pytest.approx(sum(values) / 3)
    assert (r["min"], r["max"], r["n"], r["sweep"], r["unit"]) == (min(values), max(values), 3, "toy", "MSE")
    assert {"name", "value", "unit", "baseline", "ratio"} <= set(r)
    assert "| spread over seeds |" in markdown_table(records) and ", n=3 |" in markdown_table(records)


def test_tables_without_sweeps_keep_their_format():
    table = markdown_table([record("x_ms", 31.46, "ms", baseline=29.5)])
    assert table.splitlines() == [
        "| name | value | unit | baseline | ratio |",
        "|---|---:|---|---:|---:|",
        "| x_ms | 31.5 | ms | 29.5 | 1.07 |",
    ]


def test_run_py_lists_a_committed_sweep_section(monkeypatch, toy):
    spec, _, out, _ = toy
    runner.run_sweep("toy", spec, [0, 1, 2], out_dir=out)
    import run  # benchmarks/run.py

    monkeypatch.setattr(run, "SWEEP_DIR", out)
    monkeypatch.setattr(run, "problems", lambda name, spec: runner.problems(name, spec, out))

    class Args:
        failed = False

    records = run.committed_sweep("toy", spec)(Args)
    assert [r["name"] for r in records] == ["toy_error/30", "toy_error/60"] and not Args.failed
    spec.config = {"lr": 0.5}  # now stale: reported, and the exit status becomes 1
    run.committed_sweep("toy", spec)(Args)
    assert Args.failed


@pytest.mark.slow  # --list imports every sweep's module and hashes the code it recorded (seconds)
def test_runner_command_line_rejects_bad_requests(capsys):
    with pytest.raises(SystemExit):
        sweep_cli.main(["no_such_sweep"])
    assert "unknown sweep(s) ['no_such_sweep']" in capsys.readouterr().err
    assert sweep_cli.main(["--list"]) == 0


# --- package data: sweeps reach a pip-installed course_lib (Colab) ---------------


@pytest.mark.slow
def test_sweeps_ship_in_the_wheel_and_load_from_it(tmp_path):
    """Build the wheel from a copy of the project, then load a committed sweep with load_sweep()
    from the wheel alone (a zip on sys.path, no checkout)."""
    src = tmp_path / "src"
    shutil.copytree(ROOT / "course_lib", src / "course_lib", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ["pyproject.toml", "README.md"]:
        shutil.copy(ROOT / name, src / name)
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
    shipped = committed_sweeps()[0]
    assert f"course_lib/sweeps/{shipped}.json" in names and "course_lib/pages/sweeps.py" in names
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import course_lib.pages.sweeps as e; "
        "assert e.__file__.startswith(sys.argv[1]), e.__file__; "
        "print(e.load_sweep(sys.argv[2]).seeds)"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", code, str(wheel), shipped],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(load_sweep(shipped).seeds)


def test_read_sweep_of_a_committed_file_equals_load_sweep():
    for name in committed_sweeps():
        assert read_sweep(ROOT / "course_lib" / "sweeps" / f"{name}.json").data == load_sweep(name).data


# --- a sweep made on another CPU vendor's kernels: re-blessed against a commit ---------------

AMD_MADE = "ln_init_gradients"  # made on an AMD EPYC; its smoke runs take seconds


@pytest.fixture
def amd_made(tmp_path):
    shutil.copy(runner.SWEEP_DIR / f"{AMD_MADE}.json", tmp_path)
    return runner.registered_sweeps()[AMD_MADE], tmp_path


@pytest.mark.slow
def test_rebless_against_a_commit_keeps_the_sweeps_own_canary(amd_made):
    """The code of HEAD (a worktree) and of this checkout run the smoke runs on this machine's
    kernels; identical, the file keeps the canary recorded on its own kernels and notes the
    comparison."""
    spec, out = amd_made
    before = read_sweep(out / f"{AMD_MADE}.json").provenance
    kept, why = sweep_rebless.rebless_against(AMD_MADE, spec, "HEAD", out)
    after = read_sweep(out / f"{AMD_MADE}.json").provenance
    print(kept, why)
    assert kept, why
    print(after["reblessed"][-1]["canary"])
    assert after["canary"] == before["canary"]
    assert (
        f"compared instead: the smoke runs of commit {runner.git_commit()[:10]}"
        in after["reblessed"][-1]["canary"]
    )
    assert runner.problems(AMD_MADE, spec, out) == []


def test_rebless_against_a_commit_refuses_other_numbers(amd_made, monkeypatch):
    """If the smoke runs of the commit and of this code differ here, the sweep is not re-blessed."""
    spec, out = amd_made
    now = runner.smoke(spec)["canary"]
    then = json.loads(json.dumps(now))
    then[0]["losses"][0] += 1e-7
    here = sweep_rebless.fresh_kernels()  # pinned, as the worktree's run is
    monkeypatch.setattr(
        sweep_rebless, "canary_at", lambda name, ref: {"commit": "0" * 40, "kernels": here, "canary": then}
    )
    monkeypatch.setattr(sweep_rebless, "smoke_fresh", lambda name, spec: {**runner.smoke(spec)})
    text = (out / f"{AMD_MADE}.json").read_text()
    kept, why = sweep_rebless.rebless_against(AMD_MADE, spec, "HEAD", out)
    print(why)
    assert not kept and "give other numbers here" in why
    assert (out / f"{AMD_MADE}.json").read_text() == text
