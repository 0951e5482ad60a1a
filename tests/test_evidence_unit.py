"""course_lib.evidence: summaries, comparisons with a margin, fingerprints, sweeps, figures."""

import json
import math
import sys
from pathlib import Path

import matplotlib
import numpy as np
import pytest
import torch

from course_lib import evidence
from course_lib.evidence import (
    Summary,
    Sweep,
    assert_better,
    assert_indistinguishable,
    assert_within,
    fingerprint,
    plot_seeds,
    plot_sweep,
    read_sweep,
    source_of,
    summarize,
)

matplotlib.use("Agg")


# --- summaries ---------------------------------------------------------------


def test_summary_statistics():
    s = summarize([2.0, 4.0, 9.0], "LSTM")
    assert (s.n, s.mean, s.min, s.max) == (3, 5.0, 2.0, 9.0)
    assert s.std == pytest.approx(math.sqrt(((2 - 5) ** 2 + (4 - 5) ** 2 + (9 - 5) ** 2) / 2))
    assert str(s) == "LSTM: mean 5 ± 3.6 (std), range [2, 9], n=3; per seed 2 4 9"
    assert math.isnan(summarize([1.5]).std) and str(summarize([1.5], "x")) == "x: 1.5 (one run)"


@pytest.mark.parametrize(
    "values", [np.array([1.0, 2.0, 3.0]), torch.tensor([1.0, 2.0, 3.0]), (1, 2, 3), Summary((1.0, 2.0, 3.0))]
)
def test_summary_accepts_arrays_tensors_and_summaries(values):
    assert summarize(values).values == (1.0, 2.0, 3.0)


@pytest.mark.parametrize(
    "values, error, words",
    [
        ([], ValueError, "empty"),
        ([1.0, float("nan"), 2.0], ValueError, "NaN"),
        (3.0, TypeError, "sequence"),
        ("123", TypeError, "sequence"),
        (torch.tensor(2.0), TypeError, "sequence"),
    ],
)
def test_summary_rejects_bad_input_by_name(values, error, words):
    with pytest.raises(error, match=words):
        summarize(values)


def test_summary_keeps_infinity_as_a_diverged_run():
    assert summarize([1.0, math.inf, 2.0]).max == math.inf


# --- assert_better -----------------------------------------------------------


def test_assert_better_prints_seeds_spread_gap_and_margin(capsys):
    result = assert_better(
        [0.91, 0.95, 0.93],
        [0.52, 0.61, 0.55],
        higher_is_better=True,
        margin=0.1,
        metric="exact match",
        label_a="attention",
        label_b="no attention",
    )
    out = capsys.readouterr().out
    assert result is None  # nothing echoed on a cell's last line
    for text in [
        "attention beats no attention on exact match (higher is better)?",
        "per seed 0.91 0.95 0.93",
        "per seed 0.52 0.61 0.55",
        "range [0.91, 0.95]",
        "worst attention 0.91 vs best no attention 0.61",
        "gap 0.3 >= margin 0.1",
        "✓",
    ]:
        assert text in out, text
    assert "True" not in out


def test_assert_better_lower_is_better(capsys):
    assert_better([2.1, 2.12, 2.11], [2.3, 2.25, 2.4], higher_is_better=False)
    assert "worst A 2.12 vs best B 2.25: gap 0.13 >= margin 0" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="NOT better"):
        assert_better([2.3, 2.25, 2.4], [2.1, 2.12, 2.11], higher_is_better=False)


def test_assert_better_fails_when_ranges_overlap_even_if_the_means_differ(capsys):
    with pytest.raises(AssertionError) as failure:
        assert_better([0.9, 0.5, 0.92], [0.6, 0.55, 0.58], higher_is_better=True, label_a="A", label_b="B")
    message = str(failure.value)
    assert "worst A 0.5 vs best B 0.6: gap -0.1 < margin 0" in message and "per seed 0.9 0.5 0.92" in message
    assert message in capsys.readouterr().out  # printed as well as raised


def test_assert_better_fails_when_the_gap_is_below_the_margin():
    with pytest.raises(AssertionError, match=r"gap 0.05 < margin 0.1"):
        assert_better([0.7, 0.71, 0.72], [0.6, 0.65, 0.62], higher_is_better=True, margin=0.1)


def test_assert_better_uses_the_labels_of_summaries(capsys):
    assert_better(summarize([3, 4, 5], "GRU"), summarize([0, 1, 2], "RNN"), higher_is_better=True)
    assert "GRU beats RNN" in capsys.readouterr().out


@pytest.mark.parametrize(
    "a, b, arg", [([1, 2], [0, 0, 0], "a has 2 value"), ([1, 2, 3], [0], "b has 1 value")]
)
def test_assert_better_needs_three_seeds(a, b, arg):
    with pytest.raises(ValueError, match=arg + r".*>= 3 seeds"):
        assert_better(a, b, higher_is_better=True)


def test_assert_better_rejects_a_negative_margin():
    with pytest.raises(ValueError, match="margin"):
        assert_better([3, 4, 5], [0, 1, 2], higher_is_better=True, margin=-1)


def test_assert_better_needs_the_direction():
    with pytest.raises(TypeError, match="higher_is_better"):
        assert_better([3, 4, 5], [0, 1, 2])


# --- assert_indistinguishable -----------------------------------------------


def test_indistinguishable_when_ranges_overlap(capsys):
    assert_indistinguishable([2.6, 2.8, 2.7], [2.75, 2.9, 2.85], metric="bpc", label_a="LSTM", label_b="GPT")
    out = capsys.readouterr().out
    assert "ranges [2.6, 2.8] and [2.75, 2.9] overlap" in out and "no robust difference" in out


@pytest.mark.parametrize("a, b", [([1, 2, 3], [3.5, 4, 5]), ([3.5, 4, 5], [1, 2, 3])])
def test_indistinguishable_fails_when_one_range_is_above(a, b):
    with pytest.raises(AssertionError, match="do NOT overlap"):
        assert_indistinguishable(a, b)


def test_indistinguishable_needs_three_seeds():
    with pytest.raises(ValueError, match=">= 3 seeds"):
        assert_indistinguishable([1, 2], [1, 2, 3])


# --- assert_within -----------------------------------------------------------


def test_assert_within_inside_and_with_slack(capsys):
    assert_within(2.15, [2.1, 2.2, 2.18], slack=0.0, metric="bpc")
    assert_within(torch.tensor(2.22), [2.1, 2.2, 2.18], slack=0.05)
    assert_within([2.12, 2.19], np.array([2.1, 2.2, 2.18]), slack=0)
    out = capsys.readouterr().out
    assert "allowed [2.1, 2.2]" in out and "allowed [2.05, 2.25]" in out and "per seed 2.1 2.2 2.18" in out


@pytest.mark.parametrize("live", [2.3, [2.15, 2.3], 2.0])
def test_assert_within_fails_outside_and_names_the_value(live):
    with pytest.raises(AssertionError, match=r"OUTSIDE: (2\.3|2)$"):
        assert_within(live, [2.1, 2.2, 2.18], slack=0.01)


def test_assert_within_checks_its_arguments():
    with pytest.raises(ValueError, match="slack"):
        assert_within(2.1, [2.1, 2.2, 2.18], slack=-0.1)
    with pytest.raises(ValueError, match="committed has 2"):
        assert_within(2.1, [2.1, 2.2], slack=0.1)
    with pytest.raises(ValueError, match="live contains NaN"):
        assert_within(float("nan"), [2.1, 2.2, 2.18], slack=0.1)


# --- fingerprints ------------------------------------------------------------

RECIPE = '''
"""A synthetic recipe module."""

SCALE = 2.0


def train(x, seed=0):
    """Train it."""
    # a comment
    return SCALE * x + seed


def helper():
    return 1
'''


@pytest.fixture
def synthetic_module(tmp_path, monkeypatch):
    """A module `synth_recipe_<n>` in a temporary folder on sys.path; returns (name, path)."""
    name = f"synth_recipe_{abs(hash(str(tmp_path))) % 10**8}"
    path = tmp_path / f"{name}.py"
    path.write_text(RECIPE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name, path
    sys.modules.pop(name, None)


def test_fingerprint_is_stable_and_order_free(synthetic_module):
    name, _ = synthetic_module
    a = fingerprint(f"{name}:train", [name], {"lr": 0.01, "steps": 100})
    assert a.startswith("sha256:") and len(a) == 7 + 16
    assert fingerprint([f"{name}:train"], (name,), {"steps": 100, "lr": 0.01}) == a
    assert fingerprint([f"{name}:train", name], [], {"lr": 0.01, "steps": 100}) == a  # a set of sources
    assert fingerprint(f"{name}:train", [name], {"lr": 0.02, "steps": 100}) != a  # config counts


def test_fingerprint_ignores_comments_docstrings_and_formatting(synthetic_module):
    name, path = synthetic_module
    before = fingerprint(f"{name}:train", [], None)
    path.write_text(
        RECIPE.replace('"""Train it."""', '"""Train it, better worded."""')
        .replace("# a comment", "# another comment")
        .replace("SCALE * x + seed", "SCALE*x  +  seed")
    )
    assert fingerprint(f"{name}:train", [], None) == before


def test_fingerprint_changes_with_the_code(synthetic_module):
    name, path = synthetic_module
    function_only, whole = fingerprint(f"{name}:train", [], None), fingerprint(f"{name}:train", [name], None)
    path.write_text(RECIPE.replace("return 1", "return 2"))  # outside train(): only the whole module sees it
    assert fingerprint(f"{name}:train", [], None) == function_only
    assert fingerprint(f"{name}:train", [name], None) != whole
    path.write_text(RECIPE.replace("SCALE * x + seed", "SCALE * x - seed"))
    assert fingerprint(f"{name}:train", [], None) != function_only


def test_fingerprint_reads_the_file_not_a_stale_import(synthetic_module):
    name, path = synthetic_module
    __import__(name)
    before = fingerprint(f"{name}:SCALE", [], None)  # a constant can be a recipe too
    path.write_text(RECIPE.replace("SCALE = 2.0", "SCALE = 3.0"))
    assert fingerprint(f"{name}:SCALE", [], None) != before


def test_source_of_a_function_a_class_method_and_errors(synthetic_module):
    name, _ = synthetic_module
    assert source_of(f"{name}:train").startswith("def train(x, seed=0):")
    assert "Train it" not in source_of(f"{name}:train") and "comment" not in source_of(name)
    assert "def lstm_step" in source_of("course_lib.rnn")
    assert source_of("course_lib.evidence:Sweep.values").startswith("def values(self, metric")
    with pytest.raises(ValueError, match="no function, class or assignment named 'nope'"):
        source_of(f"{name}:nope")
    with pytest.raises(ValueError, match="no Python source file"):
        source_of("no_such_module_xyz")


# --- sweeps ------------------------------------------------------------------


def make_sweep(**changes):
    runs = [
        {
            "point": {"kind": kind, "steps": steps},
            "seed": seed,
            "seconds": 1.0,
            "results": {"bpc": base - steps / 1000 + 0.01 * seed},
        }
        for kind, base in [("rnn", 2.4), ("lstm", 2.2)]
        for steps in [100, 400]
        for seed in [2, 0, 1]
    ]
    data = {
        "schema": evidence.SCHEMA,
        "name": "demo",
        "title": "Demo",
        "description": "",
        "recipe": ["course_lib.evidence:summarize"],
        "modules": [],
        "config": {"lr": 0.01},
        "points": [{"kind": k, "steps": s} for k in ["rnn", "lstm"] for s in [100, 400]],
        "seeds": [0, 1, 2],
        "metrics": {"bpc": {"unit": "bits/char", "higher_is_better": False}},
        "runs": runs,
        "fingerprint": "",
        "command": "python benchmarks/sweep.py demo",
        "wall_seconds": 12.0,
        "machine": {"cpu_count": 2},
        "date": "2026-01-01T00:00:00+00:00",
    }
    data["fingerprint"] = fingerprint(
        data["recipe"], data["modules"], {"config": data["config"], "points": data["points"]}
    )
    data.update(changes)
    return Sweep(data)


def test_sweep_selects_values_in_seed_order():
    sweep = make_sweep()
    assert sweep.values("bpc", kind="lstm", steps=100) == pytest.approx([2.1, 2.11, 2.12])
    assert sweep.summary("bpc", kind="rnn", steps=400).label == "kind=rnn, steps=400"
    assert sweep.select(kind="rnn") == [{"kind": "rnn", "steps": 100}, {"kind": "rnn", "steps": 400}]
    assert sweep.expected_fingerprint() == sweep.fingerprint
    assert "demo" in repr(sweep) and "4 points × 3 seeds" in repr(sweep)


def test_sweep_errors_name_the_problem():
    sweep = make_sweep()
    with pytest.raises(ValueError, match="selects 2 points"):
        sweep.values("bpc", kind="rnn")
    with pytest.raises(ValueError, match="selects 0 points"):
        sweep.values("bpc", kind="gpt", steps=100)
    with pytest.raises(KeyError, match="no metric 'bleu'"):
        sweep.values("bleu", kind="rnn", steps=100)
    with pytest.raises(ValueError, match="schema"):
        Sweep({"schema": "other"})
    with pytest.raises(ValueError, match=r"lacks the field\(s\) \['runs'\]"):
        Sweep({k: v for k, v in make_sweep().data.items() if k != "runs"})


def test_sweep_round_trips_through_json(tmp_path):
    path = tmp_path / "demo.json"
    path.write_text(json.dumps(make_sweep().data))
    assert read_sweep(path).values("bpc", kind="rnn", steps=100) == make_sweep().values(
        "bpc", kind="rnn", steps=100
    )


def test_load_sweep_names_the_committed_ones():
    with pytest.raises(FileNotFoundError, match="no committed sweep 'no_such_sweep'"):
        evidence.load_sweep("no_such_sweep")
    for name in evidence.committed_sweeps():
        assert evidence.load_sweep(name).name == name


def test_a_committed_live_run_check_reads_like_a_chapter(capsys):
    sweep = make_sweep()
    assert_within(2.315, sweep.values("bpc", kind="rnn", steps=100), slack=0.0, metric="bpc")
    assert_better(
        sweep.summary("bpc", kind="lstm", steps=400),
        sweep.summary("bpc", kind="rnn", steps=400),
        higher_is_better=False,
        margin=0.1,
        metric="bpc",
    )
    assert "kind=lstm, steps=400 beats kind=rnn, steps=400" in capsys.readouterr().out


# --- figures -----------------------------------------------------------------


def test_plot_sweep_numeric_axis_draws_dots_band_mean_and_live_point():
    sweep = make_sweep()
    ax = plot_sweep(sweep, "bpc", "steps", where={"kind": "rnn"}, live={400: 2.0, 100: [2.3, 2.31]})
    dots = [line for line in ax.lines if line.get_marker() == "o"]
    assert len(dots) == 2 and all(len(d.get_ydata()) == 3 for d in dots)
    mean = next(line for line in ax.lines if line.get_linestyle() == "-")
    assert list(mean.get_xdata()) == [100, 400] and mean.get_ydata()[0] == pytest.approx(2.31)
    live = [line for line in ax.lines if line.get_marker() == "D"]
    assert sorted(y for line in live for y in line.get_ydata()) == [2.0, 2.3, 2.31]
    assert len(ax.collections) == 1  # the min-max band
    assert ax.get_ylabel() == "bpc (bits/char)" and ax.get_xlabel() == "steps"
    assert {t.get_text() for t in ax.get_legend().get_texts()} == {"demo (mean, min–max)", "this run"}


def test_plot_sweep_categorical_axis_uses_error_bars_not_lines():
    ax = plot_sweep(make_sweep(), "bpc", "kind", where={"steps": 100}, live={"lstm": 2.11})
    assert [t.get_text() for t in ax.get_xticklabels()] == ["rnn", "lstm"]
    assert not [line for line in ax.lines if line.get_linestyle() == "-" and len(line.get_xdata()) > 1]
    assert ax.containers  # error bars


def test_plot_sweep_errors():
    with pytest.raises(ValueError, match="distinct 'steps'"):
        plot_sweep(make_sweep(), "bpc", "steps")  # kind not fixed: two points per x
    with pytest.raises(ValueError, match="live x=999"):
        plot_sweep(make_sweep(), "bpc", "steps", where={"kind": "rnn"}, live={999: 2.0})


def test_plot_seeds_draws_every_seed():
    ax = plot_seeds({"RNN": [2.3, 2.4, 2.35], "LSTM": [2.1, 2.2, 2.15]}, metric="bpc")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["RNN", "LSTM"]
    assert sum(len(line.get_ydata()) for line in ax.lines if line.get_marker() == "o") == 6


def test_module_stays_readable():
    lines = Path(evidence.__file__).read_text().splitlines()
    assert len(lines) <= 450, len(lines)
