"""The explorers of the chapters on multi-head attention and positional encodings (Python side).

The browser test (test_site_multihead.py) checks that the page switches frames; here we
check that the frames hold the right numbers, computed by course_lib.
"""

import json

import matplotlib
import pytest
import torch

matplotlib.use("Agg")

from course_lib import attention
from course_lib.positional import sinusoidal_encoding
from course_lib.widgets import MASK_SENTENCES, HeadsExplorer, MasksExplorer, PositionsExplorer, frame_key


def _heads_explorer():
    g = torch.Generator().manual_seed(0)
    maps = {h: torch.softmax(torch.randn(2, h, 3, 3, generator=g), -1) for h in (1, 2, 4, 8)}
    labels = [(list("abc"), list("abc")), (list("xyz"), list("xyz"))]
    stats = {h: [("acc", "accuracy", 0.1 * h, 3)] for h in maps}
    return HeadsExplorer(maps, labels, stats, heads=2), maps


def test_heads_explorer_one_map_per_head_with_the_given_weights():
    ex, maps = _heads_explorer()
    assert set(ex.spec["frames"]) == {frame_key((i, j)) for i in range(4) for j in range(2)}
    for h in (1, 2, 4, 8):
        frame = ex.frame(heads=h, example=1)
        shown = torch.tensor([m["matrix"] for m in frame["maps"]["maps"]])
        assert shown.shape == (h, 3, 3)
        torch.testing.assert_close(shown, maps[h][1], atol=1e-3, rtol=0)
        assert frame["maps"]["rows"] == list("xyz")
        assert {s["name"]: s["value"] for s in frame["stats"]} == {
            "acc": pytest.approx(0.1 * h),
            "num_maps": h,
        }


def test_heads_explorer_rejects_maps_of_the_wrong_shape():
    with pytest.raises(ValueError, match=r"maps\[2\]"):
        HeadsExplorer({2: torch.rand(1, 3, 4, 4)}, [(list("abcd"), list("abcd"))])


def test_heads_explorer_static_figure_has_a_row_per_model():
    ex, _ = _heads_explorer()
    fig = ex.figure()
    maps = [a for ax in fig.axes for a in [ax, *ax.child_axes] if a.images]  # small multiples: insets
    assert len(maps) == 1 + 2 + 4 + 8


@pytest.fixture(scope="module")
def masks():
    return MasksExplorer()


def _w(frame, key="weights"):
    return torch.tensor(frame[key]["matrix"])


@pytest.mark.parametrize("sequence", range(len(MASK_SENTENCES)))
def test_masks_explorer_causal_mask_zeroes_the_future(masks, sequence):
    w = _w(masks.frame(sequence=sequence, padding=False, causal=True))
    assert (w.triu(1) == 0).all()
    assert not (_w(masks.frame(sequence=sequence, padding=False, causal=False)).triu(1) == 0).all()


@pytest.mark.parametrize("sequence", range(len(MASK_SENTENCES)))
def test_masks_explorer_padding_mask_zeroes_the_pad_keys(masks, sequence):
    n = len(MASK_SENTENCES[sequence].split())
    for causal in (False, True):
        frame = masks.frame(sequence=sequence, padding=True, causal=causal)
        w = _w(frame)
        assert (w[:, n:] == 0).all()
        torch.testing.assert_close(w.sum(-1), torch.ones(len(w)), atol=2e-3, rtol=0)
        stats = {s["name"]: s["value"] for s in frame["stats"]}
        assert stats["pad_weight"] == 0 and stats["row_sum_min"] == pytest.approx(1, abs=1e-3)


def test_masks_explorer_shows_both_conventions(masks):
    for key, frame in masks.spec["frames"].items():
        allowed, blocked = _w(frame, "allowed"), _w(frame, "blocked")
        assert ((allowed + blocked) == 1).all(), key
    frame = masks.frame(sequence=1, padding=True, causal=True)
    T = len(frame["allowed"]["matrix"])
    expected = attention.causal_mask(T) & attention.padding_mask(torch.tensor([2]), T)[0, 0]
    assert (_w(frame, "allowed").bool() == expected).all()


def test_masks_explorer_frames_match_course_lib(masks):
    """The weights shown are course_lib's scaled dot-product attention under the chosen mask."""
    frame = masks.frame(sequence=0, padding=False, causal=True)
    w = _w(frame)
    assert w.shape == (6, 6) and (w.sum(-1) - 1).abs().max() < 2e-3
    assert frame["weights"]["rows"] == MASK_SENTENCES[0].split()


@pytest.fixture(scope="module")
def positions():
    return PositionsExplorer()


@pytest.mark.parametrize("d_model", [16, 128])
@pytest.mark.parametrize("base", [100, 10000])
def test_positions_explorer_table_is_the_sinusoidal_encoding(positions, d_model, base):
    frame = positions.frame(d_model=d_model, base=base)
    table = torch.tensor(frame["table"]["matrix"])
    torch.testing.assert_close(table, sinusoidal_encoding(40, d_model, base=float(base)), atol=6e-3, rtol=0)
    stats = {s["name"]: s["value"] for s in frame["stats"]}
    assert stats["curve_spread"] < 1e-6  # similarity depends on the offset only
    assert stats["min_distance"] > 0.5  # unique codes
    curves = frame["similarity"]["series"]
    assert len(curves) == 3 and all(c["y"][0] == pytest.approx(1.0) for c in curves)


def test_positions_explorer_small_base_decorrelates_faster(positions):
    small = {s["name"]: s["value"] for s in positions.frame(d_model=64, base=100)["stats"]}
    paper = {s["name"]: s["value"] for s in positions.frame(d_model=64, base=10000)["stats"]}
    assert small["similarity_10"] < paper["similarity_10"] - 0.2


def test_specs_are_small_json(positions, masks):
    ex, _ = _heads_explorer()
    for explorer in (positions, masks, ex):
        assert len(json.dumps(explorer.spec)) < 300_000


def test_bad_control_value_is_rejected(positions):
    with pytest.raises(ValueError, match="d_model"):
        positions.frame(d_model=48)
