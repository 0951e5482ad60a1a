"""The explorers' Python side: frames, traits, static fallback, bad input.

The browser test (test_site_pages.py) checks that the page switches frames; here we
check that the frames hold the right numbers, computed by course_lib.
"""

import json
import math

import matplotlib
import pytest
import torch

matplotlib.use("Agg")

from course_lib import attention
from course_lib.widgets import (
    D_K_OPTIONS,
    STATIC,
    DkExplorer,
    Explorer,
    dk_frame,
    frame_key,
    softmax_gradient_norm,
)


@pytest.fixture(scope="module")
def explorer():
    return DkExplorer()


def test_one_frame_per_combination_of_controls(explorer):
    frames = explorer.spec["frames"]
    assert len(frames) == len(D_K_OPTIONS) * 2
    assert set(frames) == {frame_key((i, j)) for i in range(len(D_K_OPTIONS)) for j in (0, 1)}


def test_spec_is_json_serialisable_and_small(explorer):
    text = json.dumps(explorer.spec)
    assert len(text) < 200_000  # it is embedded in the page


def _stats(frame):
    return {s["name"]: s["value"] for s in frame["stats"]}


@pytest.mark.parametrize("d_k", [1, 16, 256, 1024])
def test_score_variance_is_about_d_k_unscaled_and_1_scaled(explorer, d_k):
    unscaled = _stats(explorer.frame(d_k=d_k, scaled=False))
    scaled = _stats(explorer.frame(d_k=d_k, scaled=True))
    assert unscaled["variance"] == pytest.approx(d_k, rel=0.15)
    assert scaled["variance"] == pytest.approx(1.0, rel=0.15)
    assert unscaled["expected_variance"] == d_k and scaled["expected_variance"] == 1


def test_unscaled_softmax_saturates_and_its_gradient_vanishes(explorer):
    big = _stats(explorer.frame(d_k=1024, scaled=False))
    fixed = _stats(explorer.frame(d_k=1024, scaled=True))
    assert big["max_weight"] > 0.99 and fixed["max_weight"] < 0.5
    assert big["grad_norm"] < fixed["grad_norm"] / 1000
    assert big["entropy"] < 0.1 < 1.5 < fixed["entropy"] <= math.log(16)


def test_frame_numbers_match_course_lib():
    """The weights shown are softmax(scaled_dot_score(q, k)) of course_lib for the typical query:
    the one whose largest weight is the median over the queries."""
    g = torch.Generator().manual_seed(3)
    for _ in range(2):  # dk_frame draws the independent query-key pairs first
        torch.randn(8192, 1, 32, generator=g, dtype=torch.float64)
    q = torch.randn(8, 32, generator=g, dtype=torch.float64)
    k = torch.randn(5, 32, generator=g, dtype=torch.float64)
    frame = dk_frame(32, True, n_queries=8, n_keys=5, seed=3)
    _, weights = attention.scaled_dot_product_attention(q, k, torch.eye(5, dtype=torch.float64))
    typical = weights[weights.max(-1).values.argsort()[4]]
    assert frame["weights"]["values"] == pytest.approx(typical.tolist(), abs=1e-6)
    assert frame["weights"]["highlight"] == int(typical.argmax())
    assert max(frame["weights"]["values"]) == pytest.approx(
        next(s["value"] for s in frame["stats"] if s["name"] == "max_weight"), abs=0.15
    )
    density = torch.tensor(frame["scores"]["counts"])
    width = frame["scores"]["edges"][1] - frame["scores"]["edges"][0]
    assert float(density.sum() * width) == pytest.approx(1.0, abs=1e-3)


def test_softmax_gradient_norm_is_the_jacobian_norm():
    s = torch.randn(3, 7, dtype=torch.float64)
    p = torch.softmax(s, -1)
    for row in range(3):
        J = torch.autograd.functional.jacobian(lambda x: torch.softmax(x, -1), s[row])
        assert softmax_gradient_norm(p)[row] == pytest.approx(J.norm().item())


def test_traits_follow_the_controls_and_select_the_frame():
    ex = DkExplorer(d_k=8, scaled=True)
    assert (ex.d_k, ex.scaled) == (8, True)
    assert ex.frame() is ex.spec["frames"][frame_key((3, 1))]
    ex.d_k = 512  # what the front end does when the slider moves (with a kernel)
    assert ex.frame() is ex.spec["frames"][frame_key((9, 1))]


def test_bad_values_are_rejected_with_the_options():
    with pytest.raises(ValueError, match=r"d_k=3 must be one of \[1, 2, 4"):
        DkExplorer(d_k=3)
    with pytest.raises(ValueError, match=r"d_k=5 is not one of the explorer's options"):
        DkExplorer().frame(d_k=5)


def test_static_fallback_figure_draws_every_panel(explorer):
    fig = explorer.figure([{"d_k": 4, "scaled": False}, {"d_k": 1024, "scaled": True}])
    assert len(fig.axes) == 2 * len(explorer.spec["panels"])
    bars = fig.axes[1].patches
    assert len(bars) == 16


def test_front_end_is_one_shared_module_that_knows_every_panel_kind(explorer):
    js = (STATIC / "explorer.js").read_text()
    assert DkExplorer._esm is Explorer._esm and "export default { render }" in js
    for kind in ["histogram", "bars", "lines", "heatmap", "stats"]:
        assert f"  {kind}(el, panel, d)" in js
    assert {p["kind"] for p in explorer.spec["panels"]} <= {"histogram", "bars", "lines", "heatmap", "stats"}
    assert "http://" not in js.replace("http://www.w3.org/2000/svg", "") and "https://" not in js
