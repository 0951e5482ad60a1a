"""The grouped-query attention explorer (chapter 12): one frame per (n_kv_head, context); the
grouping is llama.Attention's (probed with crafted weights), the bytes are those of filled
KVCaches, the times the committed sweep's means; traits, the static figure, bad input."""

import copy
import json
import statistics

import matplotlib
import pytest
import torch

matplotlib.use("Agg")

from course_lib import llama
from course_lib.multihead import KVCache
from course_lib.pages.sweeps import Sweep, load_sweep
from course_lib.widgets import CONTEXT_OPTIONS, KV_HEAD_OPTIONS, GQAExplorer, frame_key
from course_lib.widgets.gqa import cache_bytes_per_token, chapter_config, kv_head_of


@pytest.fixture(scope="module")
def sweep():
    return load_sweep("modern_gqa_cache")


@pytest.fixture(scope="module")
def ex(sweep):
    return GQAExplorer(sweep)


def stats(frame):
    return {s["name"]: s["value"] for s in frame["stats"]}


def probe_kv_heads(n_kv_head):
    """Which key/value head each query head of llama.Attention reads, seen through its output:
    queries and keys zero (uniform attention), key/value head j's value the constant j + 1,
    o_proj the identity, so query head i's slice of the output is g(i) + 1."""
    config = chapter_config(n_kv_head)
    att = llama.Attention(config)
    d_k, C = att.d_k, config.n_embd
    with torch.no_grad():
        att.q_proj.weight.zero_()
        att.k_proj.weight.zero_()
        values = torch.arange(1.0, n_kv_head + 1).repeat_interleave(d_k)  # (n_kv_head d_k,): j + 1
        att.v_proj.weight.copy_(values[:, None].expand(-1, C) / C)  # x = ones: v_j = j + 1
        att.o_proj.weight.copy_(torch.eye(C))
        y = att(torch.ones(1, 5, C))  # (1, T, C)
    heads = y.view(1, 5, config.n_head, d_k)  # query head i's output in its slice
    assert torch.allclose(heads, heads[..., :1]), "each head's output should be one constant"
    return [round(v) - 1 for v in heads[0, -1, :, 0].tolist()]


def filled_cache_bytes_per_token(n_kv_head, batch=2, context=12):
    """The bytes of the KVCaches a Llama fills reading `context` tokens of `batch` sequences, per token."""
    torch.manual_seed(0)
    model = llama.Llama(chapter_config(n_kv_head))
    caches = [KVCache() for _ in model.model.layers]
    with torch.no_grad():
        model(torch.randint(model.config.vocab_size, (batch, context)), caches)
    assert all(c.k.shape == (batch, n_kv_head, context, 32) for c in caches)
    return sum(c.k.nbytes + c.v.nbytes for c in caches) / (batch * context)


def test_one_frame_per_combination_and_a_light_spec(ex):
    assert set(ex.spec["frames"]) == {
        frame_key((i, j)) for i in range(len(KV_HEAD_OPTIONS)) for j in range(len(CONTEXT_OPTIONS))
    }
    assert len(json.dumps(ex.spec)) < 20_000
    assert [c["options"] for c in ex.spec["controls"]] == [[4, 2, 1], [64, 1024]]


@pytest.mark.parametrize("n_kv_head", KV_HEAD_OPTIONS)
def test_the_grouping_is_the_one_llama_attention_computes(ex, n_kv_head):
    read = probe_kv_heads(n_kv_head)
    print(f"n_kv_head={n_kv_head}: query heads read key/value heads {read}")
    assert read == kv_head_of(4, n_kv_head)
    matrix = ex.frame(n_kv_head=n_kv_head)["groups"]["matrix"]
    assert len(matrix) == 4 and all(len(row) == n_kv_head and sum(row) == 1 for row in matrix)
    assert [row.index(1) for row in matrix] == read


def test_the_grouping_is_consecutive_not_interleaved():
    assert kv_head_of(4, 2) == [0, 0, 1, 1] and kv_head_of(4, 1) == [0] * 4
    assert kv_head_of(4, 4) == [0, 1, 2, 3]
    assert kv_head_of(8, 2) == [0, 0, 0, 0, 1, 1, 1, 1]


@pytest.mark.parametrize("n_kv_head", KV_HEAD_OPTIONS)
def test_the_bytes_are_those_of_filled_kv_caches_and_of_the_sweep(ex, sweep, n_kv_head):
    filled = filled_cache_bytes_per_token(n_kv_head)
    formula = cache_bytes_per_token(chapter_config(n_kv_head))
    print(f"n_kv_head={n_kv_head}: filled caches {filled} bytes per token, formula {formula}")
    assert filled == formula == 2 * 4 * n_kv_head * 32 * 4
    k = KV_HEAD_OPTIONS.index(n_kv_head)
    for context in CONTEXT_OPTIONS:
        frame = ex.frame(n_kv_head=n_kv_head, context=context)
        assert frame["cache"]["values"] == [4096, 2048, 1024] and frame["cache"]["highlight"] == k
        assert stats(frame)["cache_bytes_per_token"] == formula
        assert set(sweep.values(f"cache_bytes_per_token_kv{n_kv_head}", context=context)) == {formula}
        (point,) = sweep.select(context=context)
        assert stats(frame)["cache_kib"] == formula * point["batch"] * context / 2**10


def test_a_half_precision_cache_holds_half_the_bytes():
    assert cache_bytes_per_token(chapter_config(2), torch.bfloat16) == 1024


@pytest.mark.parametrize("context", CONTEXT_OPTIONS)
def test_the_times_are_the_means_of_the_sweeps_seeds(ex, sweep, context):
    """The sweep times a generation step, a token for each of the point's sequences: the explorer
    shows the step's time divided by the sequences, the time per generated token."""
    runs = [r for r in sweep.runs if r["point"]["context"] == context]
    assert len(runs) == len(sweep.seeds) == 3
    batch = runs[0]["point"]["batch"]
    assert batch == {64: 1, 1024: 8}[context]
    means = [
        statistics.fmean(r["results"][f"ms_per_token_kv{kv}"] / batch for r in runs) for kv in KV_HEAD_OPTIONS
    ]
    for k, kv in enumerate(KV_HEAD_OPTIONS):
        frame = ex.frame(n_kv_head=kv, context=context)
        assert frame["time"]["values"] == pytest.approx(means, abs=1e-4)
        assert frame["time"]["highlight"] == k
        s = stats(frame)
        assert s["ms_per_token"] == pytest.approx(means[k], abs=1e-6)
        assert s["speedup"] == pytest.approx(means[0] / means[k], abs=1e-5)
        seeds = [r["results"][f"ms_per_token_kv{kv}"] / batch for r in runs]
        assert s["ms_per_token_spread"] == pytest.approx(max(seeds) - min(seeds), abs=1e-6)
    assert "mean of 3 repeats" in ex.spec["panels"][2]["title"]


def test_the_explorer_loads_the_committed_sweep_by_default(ex):
    assert GQAExplorer().spec == ex.spec


def test_traits_select_the_frame_and_the_figure_draws(sweep):
    ex = GQAExplorer(sweep)  # its own: the traits are moved here
    assert (ex.n_kv_head, ex.context) == (2, 1024)
    assert ex.frame() is ex.spec["frames"]["1|1"]
    ex.n_kv_head, ex.context = 1, 64
    assert ex.frame() is ex.spec["frames"]["2|0"]
    assert stats(ex.frame())["group_size"] == 4
    with pytest.raises(ValueError, match="n_kv_head=3"):
        ex.frame(n_kv_head=3)
    fig = ex.figure([{"n_kv_head": 2, "context": 1024}, {"n_kv_head": 1, "context": 64}])
    assert len(fig.axes) == 8
    assert len([a for a in fig.axes if a.images]) == 2  # the grouping heatmap, one per row


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_kv_head": 3}, r"n_kv_head=3 is not one of the explorer's options \[4, 2, 1\]"),
        ({"n_kv_head": True}, "n_kv_head=True"),
        ({"context": 128}, r"context=128 is not one of the explorer's options \[64, 1024\]"),
    ],
)
def test_bad_options(sweep, kwargs, match):
    with pytest.raises(ValueError, match=match):
        GQAExplorer(sweep, **kwargs)


def test_a_sweep_that_is_not_modern_gqa_cache_is_refused(sweep):
    with pytest.raises(TypeError, match="sweep must be a course_lib.pages.sweeps.Sweep"):
        GQAExplorer({"ms_per_token_kv4": [1.0]})
    with pytest.raises(ValueError, match=r"has no metric \['ms_per_token_kv4'"):
        GQAExplorer(load_sweep("tokens_gpt"))
    data = copy.deepcopy(sweep.data)
    data["points"] = [p for p in data["points"] if p["context"] != 64]
    with pytest.raises(ValueError, match="one point of context=64"):
        GQAExplorer(Sweep(data))
    data = copy.deepcopy(sweep.data)
    data["runs"][-1]["results"]["ms_per_token_kv1"] = float("nan")
    with pytest.raises(ValueError, match="ms_per_token_kv1 at context=1024 must be positive numbers"):
        GQAExplorer(Sweep(data))
