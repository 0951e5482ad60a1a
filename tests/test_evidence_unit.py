"""course_lib.pages.evidence and .sweeps: summaries, comparisons with a margin, "no robust
difference", live runs against their sweep on the same or other kernels, sweeps, figures."""

import json
import math
from pathlib import Path

import matplotlib
import numpy as np
import pytest
import torch

from course_lib.pages import evidence, sweeps
from course_lib.pages.evidence import (
    Summary,
    assert_better,
    difference,
    no_robust_difference,
    plot_seeds,
    summarize,
    t_quantile,
)
from course_lib.pages.sweeps import Sweep, check_live, kernel_set, plot_sweep, read_sweep, same_kernels

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
    assert_better([2.1, 2.12, 2.11], [2.3, 2.25, 2.4], higher_is_better=False, margin=0.1)
    assert "worst A 2.12 vs best B 2.25: gap 0.13 >= margin 0.1" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="NOT better"):
        assert_better([2.3, 2.25, 2.4], [2.1, 2.12, 2.11], higher_is_better=False, margin=0)


def test_assert_better_fails_when_ranges_overlap_even_if_the_means_differ(capsys):
    with pytest.raises(AssertionError) as failure:
        assert_better(
            [0.9, 0.5, 0.92], [0.6, 0.55, 0.58], higher_is_better=True, margin=0, label_a="A", label_b="B"
        )
    message = str(failure.value)
    assert "worst A 0.5 vs best B 0.6: gap -0.1 < margin 0" in message and "per seed 0.9 0.5 0.92" in message
    assert message in capsys.readouterr().out  # printed as well as raised


def test_assert_better_fails_when_the_gap_is_below_the_margin():
    with pytest.raises(AssertionError, match=r"gap 0.05 < margin 0.1"):
        assert_better([0.7, 0.71, 0.72], [0.6, 0.65, 0.62], higher_is_better=True, margin=0.1)


def test_assert_better_uses_the_labels_of_summaries(capsys):
    assert_better(summarize([3, 4, 5], "GRU"), summarize([0, 1, 2], "RNN"), higher_is_better=True, margin=1)
    assert "GRU beats RNN" in capsys.readouterr().out


@pytest.mark.parametrize(
    "a, b, arg", [([1, 2], [0, 0, 0], "a has 2 value"), ([1, 2, 3], [0], "b has 1 value")]
)
def test_assert_better_needs_three_seeds(a, b, arg):
    with pytest.raises(ValueError, match=arg + r".*>= 3 seeds"):
        assert_better(a, b, higher_is_better=True, margin=0)


def test_assert_better_rejects_a_negative_margin():
    with pytest.raises(ValueError, match="margin"):
        assert_better([3, 4, 5], [0, 1, 2], higher_is_better=True, margin=-1)


def test_assert_better_needs_the_direction_and_a_declared_margin():
    with pytest.raises(TypeError, match="higher_is_better"):
        assert_better([3, 4, 5], [0, 1, 2], margin=0)
    with pytest.raises(TypeError, match="margin"):
        assert_better([3, 4, 5], [0, 1, 2], higher_is_better=True)


def test_paired_comparison_looks_at_every_pair(capsys):
    # Unpaired, the ranges overlap (worst A 0.5 < best B 0.58); paired, every seed of A beats its
    # own partner by >= 0.05: runs that share data and initial weights are compared seed by seed.
    a, b = [0.9, 0.55, 0.7], [0.8, 0.5, 0.58]
    with pytest.raises(AssertionError, match="NOT better"):
        assert_better(a, b, higher_is_better=True, margin=0.05)
    assert_better(a, b, higher_is_better=True, margin=0.05, paired=True)
    assert "per-seed gaps 0.1 0.05 0.12: smallest 0.05 >= margin 0.05" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="smallest 0.05 < margin 0.06"):
        assert_better(a, b, higher_is_better=True, margin=0.06, paired=True)
    with pytest.raises(ValueError, match="one value per seed"):
        assert_better([1, 2, 3, 4], [0, 0, 0], higher_is_better=True, margin=0, paired=True)


# --- "no robust difference", with what the seeds could detect -----------------


@pytest.mark.parametrize(
    "df, p, table",
    [
        (2, 0.975, 4.303),
        (4, 0.975, 2.776),
        (30, 0.975, 2.042),
        (2, 0.80, 1.061),
        (10, 0.80, 0.879),
        (1, 0.975, 12.706),
    ],
)
def test_t_quantile_matches_the_tables(df, p, table):
    assert t_quantile(p, df) == pytest.approx(table, abs=2e-3)


def test_difference_paired_and_unpaired():
    a, b = [2.0, 2.2, 2.4], [1.9, 2.05, 2.35]
    d = difference(a, b, paired=True)  # per-seed differences 0.1, 0.15, 0.05: mean 0.1, sd 0.05
    se = 0.05 / math.sqrt(3)
    assert d.mean == pytest.approx(0.1) and d.df == 2
    assert (d.low, d.high) == pytest.approx((0.1 - 4.303 * se, 0.1 + 4.303 * se), abs=1e-3)
    assert d.detectable == pytest.approx((4.303 + 1.061) * se, abs=1e-3)
    u = difference(a, b)  # unpaired: Welch, the seeds' own spread counts
    assert u.mean == pytest.approx(0.1) and u.high - u.low > d.high - d.low


def test_no_robust_difference_says_what_it_could_detect(capsys):
    result = no_robust_difference(
        [2.6, 2.8, 2.7], [2.75, 2.9, 2.65], metric="bpc", label_a="LSTM", label_b="GPT"
    )
    out = capsys.readouterr().out
    assert "LSTM - GPT: -0.0667, 95 % interval [" in out and "unpaired" in out
    assert "smallest difference these seeds detect (80 % power): " in out and "✓ no robust difference" in out
    assert result.low < 0 < result.high and result.detectable > abs(result.mean)


def test_no_robust_difference_fails_when_the_seeds_show_one():
    # The review's case: ranges that touch (overlap by 1e-5) but means 2.4x apart, tight seeds.
    with pytest.raises(AssertionError, match="the interval excludes 0"):
        no_robust_difference([0.0100, 0.0101, 0.0102], [0.0241, 0.0242, 0.0243], paired=True)
    with pytest.raises(ValueError, match=">= 3 seeds"):
        no_robust_difference([1, 2], [1, 2, 3])


# --- live runs against their sweep ---------------------------------------------


def test_kernel_set_names_what_torch_computes_with():
    here = kernel_set()
    assert set(here) == set(sweeps.KERNEL_KEYS)
    assert here["torch"] == torch.__version__ and here["threads"] == torch.get_num_threads()
    assert here["aten"] == torch.backends.cpu.get_cpu_capability()
    assert same_kernels(here) and not same_kernels(dict(here, aten="AVX512"))


def test_check_live_on_the_sweeps_kernels_must_reproduce_exactly(capsys):
    sweep = make_sweep(kernels=kernel_set())
    committed = sweep.values("bpc", kind="rnn", steps=100)
    assert check_live(committed[:2], sweep, "bpc", where={"kind": "rnn", "steps": 100}) is None
    out = capsys.readouterr().out
    assert "seed 0: 2.3 here, 2.3 in the sweep  ✓ reproduced" in out and "same kernels as the sweep" in out
    with pytest.raises(AssertionError, match="DIFFERENT") as failure:
        check_live(committed[0] + 1e-12, sweep, "bpc", where={"kind": "rnn", "steps": 100})
    assert "the code or the data changed since the sweep ran" in str(failure.value)


@pytest.mark.parametrize("live", [2.0, [2.3, 2.9], {2: 5.0}])
def test_check_live_on_other_kernels_never_raises(live, capsys):
    sweep = make_sweep(kernels=dict(kernel_set(), aten="AVX512"))
    assert check_live(live, sweep, "bpc", where={"kind": "rnn", "steps": 100}) is None
    out = capsys.readouterr().out
    assert "the sweep's: torch" in out and "ATen AVX512" in out
    assert "Notice: this page's run falls outside the sweep's range [2.3, 2.32]" in out


def test_check_live_inside_the_range_on_other_kernels(capsys):
    check_live(2.305, make_sweep(kernels={}), "bpc", where={"kind": "rnn", "steps": 100})
    assert "inside the sweep's range [2.3, 2.32]" in capsys.readouterr().out


def test_check_live_checks_its_arguments():
    sweep = make_sweep(kernels=kernel_set())
    with pytest.raises(ValueError, match="4 live values for the sweep's 3 seeds"):
        check_live([1, 2, 3, 4], sweep, "bpc", where={"kind": "rnn", "steps": 100})
    with pytest.raises(ValueError, match=r"live seeds \[7\] are not among"):
        check_live({7: 2.3}, sweep, "bpc", where={"kind": "rnn", "steps": 100})
    with pytest.raises(ValueError, match="selects 2 points"):
        check_live(2.3, sweep, "bpc", where={"kind": "rnn"})


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
        "schema": sweeps.SCHEMA,
        "name": "demo",
        "title": "Demo",
        "description": "",
        "config": {"lr": 0.01},
        "points": [{"kind": k, "steps": s} for k in ["rnn", "lstm"] for s in [100, 400]],
        "seeds": [0, 1, 2],
        "metrics": {"bpc": {"unit": "bits/char", "higher_is_better": False}},
        "margins": {"bpc": 0.1},
        "version": 1,
        "runs": runs,
        "kernels": {
            "torch": "2.13.0+cpu",
            "device": "cpu",
            "aten": "AVX2",
            "mkl": "AVX2",
            "onednn": "AVX2",
            "threads": 1,
        },
        "provenance": {"smoke": {}, "definitions": {}, "data": {}, "canary": []},
        "command": "python benchmarks/sweep.py demo",
        "wall_seconds": 12.0,
        "machine": {"cpu_count": 2},
        "date": "2026-01-01T00:00:00+00:00",
    }
    data.update(changes)
    return Sweep(data)


def test_sweep_selects_values_in_seed_order():
    sweep = make_sweep()
    assert sweep.values("bpc", kind="lstm", steps=100) == pytest.approx([2.1, 2.11, 2.12])
    assert sweep.summary("bpc", kind="rnn", steps=400).label == "kind=rnn, steps=400"
    assert sweep.select(kind="rnn") == [{"kind": "rnn", "steps": 100}, {"kind": "rnn", "steps": 400}]
    assert sweep.margin("bpc") == 0.1
    assert "demo" in repr(sweep) and "4 points × 3 seeds" in repr(sweep)


def test_sweep_errors_name_the_problem():
    sweep = make_sweep()
    with pytest.raises(ValueError, match="selects 2 points"):
        sweep.values("bpc", kind="rnn")
    with pytest.raises(ValueError, match="selects 0 points"):
        sweep.values("bpc", kind="gpt", steps=100)
    with pytest.raises(KeyError, match="no metric 'bleu'"):
        sweep.values("bleu", kind="rnn", steps=100)
    with pytest.raises(KeyError, match="declares no margin 'gap'"):
        sweep.margin("gap")
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
        sweeps.load_sweep("no_such_sweep")
    for name in sweeps.committed_sweeps():
        assert sweeps.load_sweep(name).name == name


def test_a_committed_live_run_check_reads_like_a_chapter(capsys):
    sweep = make_sweep()
    check_live(2.31, sweep, "bpc", where={"kind": "rnn", "steps": 100})
    assert_better(
        sweep.summary("bpc", kind="lstm", steps=400),
        sweep.summary("bpc", kind="rnn", steps=400),
        higher_is_better=False,
        margin=sweep.margin("bpc"),
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


def test_modules_stay_readable():
    for module in (evidence, sweeps):
        lines = Path(module.__file__).read_text().splitlines()
        assert len(lines) <= 450, (module.__name__, len(lines))  # one sitting each
