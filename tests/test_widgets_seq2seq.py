"""The seq2seq explorers: frames computed with course_lib, controls validated, light specs."""

import json
import math

import pytest
import torch

from course_lib import attention
from course_lib.widgets import AlignmentExplorer, ScoreExplorer, alignment_frame
from course_lib.widgets.seq2seq import TOY_ANGLES, TOY_KEYS, TOY_LENGTHS, TOY_SCORES, toy_score_modules


@pytest.fixture(scope="module")
def score_explorer():
    return ScoreExplorer()


def test_score_explorer_has_every_frame_and_a_light_spec(score_explorer):
    spec = score_explorer.spec
    assert len(spec["frames"]) == len(TOY_SCORES) * len(TOY_ANGLES) * len(TOY_LENGTHS)
    assert len(json.dumps(spec)) < 300_000


def test_score_explorer_numbers_are_course_lib_s(score_explorer):
    q = 2.0 * torch.tensor([[0.0, 1.0]], dtype=torch.float64)  # angle 90, length 2
    frame = score_explorer.frame(score="dot", angle=90, length=2.0)
    expected_scores = attention.dot_score(q, TOY_KEYS)[0].tolist()
    assert frame["scores"]["values"] == pytest.approx(expected_scores, abs=1e-4)
    frame = score_explorer.frame(score="scaled_dot", angle=90, length=2.0)
    expected = torch.softmax(attention.scaled_dot_score(q, TOY_KEYS)[0], -1)
    assert frame["weights"]["values"] == pytest.approx(expected.tolist(), abs=1e-4)
    modules = toy_score_modules()
    with torch.no_grad():
        general = modules["general"](q, TOY_KEYS)[0]
    frame = score_explorer.frame(score="general", angle=90, length=2.0)
    assert frame["scores"]["values"] == pytest.approx(general.tolist(), abs=1e-4)


def test_score_explorer_teaches_what_the_chapter_says(score_explorer):
    def weights(**kw):
        return score_explorer.frame(**kw)["weights"]["values"]

    # dot prefers the long key (3,0) over (1,0); cosine ties them and ignores the query's length
    assert weights(score="dot", angle=0, length=4.0)[1] > 0.9
    cos = weights(score="cosine", angle=0, length=4.0)
    assert cos[0] == pytest.approx(cos[1])
    assert cos == pytest.approx(weights(score="cosine", angle=0, length=0.5))
    # location ignores the keys: the same weights as computed from the query alone
    loc = toy_score_modules()["location"]
    q = torch.tensor([[0.0, 1.0]], dtype=torch.float64)
    with torch.no_grad():
        expected = torch.softmax(loc(q)[0], -1)
    assert weights(score="location", angle=90, length=1.0) == pytest.approx(expected.tolist(), abs=1e-4)
    for angle in TOY_ANGLES:
        assert sum(weights(score="concat", angle=angle, length=1.0)) == pytest.approx(1.0, abs=1e-3)


def test_score_explorer_rejects_unknown_options():
    with pytest.raises(ValueError, match="score='bilinear' must be one of"):
        ScoreExplorer(score="bilinear")
    with pytest.raises(ValueError, match="angle=45"):
        ScoreExplorer(angle=45)
    with pytest.raises(ValueError, match="length=3"):
        ScoreExplorer(length=3)


def _alignments():
    w1 = torch.tensor([[0.9, 0.1, 0.0], [0.1, 0.8, 0.1], [0.0, 0.0, 1.0]])
    w2 = torch.full((3, 3), 1 / 3)
    return {"good": [("ab", w1), ("xy", w1[:3])], "blurred": [("ab", w2), ("yy", w2)]}


def test_alignment_explorer_frames():
    ex = AlignmentExplorer(_alignments(), {"good": 1.0, "blurred": 0.25}, ["a b", "x y"], ["ab", "xy"])
    assert set(ex.spec["frames"]) == {"0|0", "0|1", "1|0", "1|1"}
    frame = ex.frame(model="good", example=0)
    assert frame["alignment"]["rows"] == ["a", "b", "<eos>"] and frame["alignment"]["cols"] == ["a", "␣", "b"]
    stats = {s["name"]: s["value"] for s in frame["stats"]}
    assert stats["correct"] == 1 and stats["exact_match"] == 1.0
    assert stats["max_weight"] == pytest.approx((0.9 + 0.8 + 1.0) / 3)
    blurred = {s["name"]: s["value"] for s in ex.frame(model="blurred", example=1)["stats"]}
    assert blurred["correct"] == 0 and blurred["entropy"] == pytest.approx(math.log(3), abs=1e-4)
    assert ex.figure([{"model": "good", "example": 0}, {"model": "blurred", "example": 0}]) is not None


def test_alignment_explorer_bad_input():
    with pytest.raises(ValueError, match="alignments is empty"):
        AlignmentExplorer({}, {}, [], [])
    with pytest.raises(ValueError, match="has 2 examples, sources has 1"):
        AlignmentExplorer(_alignments(), {"good": 1, "blurred": 0}, ["a b"], ["ab"])
    with pytest.raises(ValueError, match="model='x' must be one of"):
        AlignmentExplorer(_alignments(), {"good": 1, "blurred": 0}, ["a b", "x y"], ["ab", "xy"], model="x")
    shape = r"weights must have shape \(len\(prediction\) \+ 1, len\(source\)\)"
    with pytest.raises(ValueError, match=shape):
        alignment_frame("abc", "ab", "ab", torch.ones(2, 3), 1.0)


def test_static_figure_row_labels_are_whole_and_clear_of_the_panels():
    """Each row's selection heads its row: drawn whole, overlapping no panel or tick label
    (it used to be the first panel's y label, where long model names ran into the heatmap's ticks)."""
    names = ["Bahdanau, bidirectional (300 steps)", "Luong scaled dot (100 steps)"]
    w = torch.softmax(torch.arange(12.0).reshape(4, 3), -1)
    ex = AlignmentExplorer({n: [("abc", w)] for n in names}, dict.fromkeys(names, 1.0), ["a b"], ["abc"])
    fig = ex.figure([{"model": n, "example": 0} for n in names])
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    labels = [sub._suptitle for sub in fig.subfigs]
    assert [t.get_text() for t in labels] == [f"model={n}, example=0" for n in names]
    figure_box = fig.bbox
    for label in labels:
        box = label.get_window_extent(renderer)
        assert figure_box.x0 <= box.x0 and box.x1 <= figure_box.x1, (label.get_text(), box, figure_box)
        for ax in fig.axes:
            assert not box.overlaps(ax.get_tightbbox(renderer)), (label.get_text(), ax)
