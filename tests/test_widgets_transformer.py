"""The layer x head explorer: one frame per (example, kind, layer, head), numbers that match
the model's own weights, and the pattern scores behind its statistics."""

import json

import pytest
import torch

from course_lib.data import Vocab
from course_lib.widgets import LayerHeadExplorer, pattern_scores
from tiny_models import tiny_transformer

EXAMPLES = [("9 may 2018", "2018-05-09"), ("the 1st of june 2001", "2001-06-01")]


@pytest.fixture(scope="module")
def explorer_and_model():
    src_vocab = Vocab.from_text([s for s, _ in EXAMPLES])
    tgt_vocab = Vocab.from_text([t for _, t in EXAMPLES])
    model = tiny_transformer(len(src_vocab), len(tgt_vocab), num_encoder_layers=3, num_decoder_layers=3)
    return LayerHeadExplorer(model, EXAMPLES, src_vocab, tgt_vocab, digits=4), model, src_vocab, tgt_vocab


def test_one_frame_per_combination_and_a_light_spec(explorer_and_model):
    ex, *_ = explorer_and_model
    assert len(ex.spec["frames"]) == 2 * 3 * 3 * 4  # examples x kinds x layers x heads
    assert len(json.dumps(ex.spec)) < 300_000


def test_frames_hold_the_models_weights(explorer_and_model):
    ex, model, src_vocab, tgt_vocab = explorer_and_model
    src, out = EXAMPLES[1]
    model(torch.tensor([src_vocab.encode(src)]), torch.tensor([tgt_vocab.encode(out, bos=True)]))
    weights = model.attention_weights()
    frame = ex.frame(example=1, kind="cross", layer=2, head=3)
    expected = weights["cross"][1][0, 2]  # (T, S)
    got = torch.tensor(frame["weights"]["matrix"])
    assert got.shape == (len(out) + 1, len(src))
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=0)
    assert frame["weights"]["rows"][0] == "<bos>" and frame["weights"]["cols"][3] == "␣"
    enc = ex.frame(example=0, kind="encoder", layer=1, head=1)["weights"]
    assert len(enc["rows"]) == len(enc["cols"]) == len(EXAMPLES[0][0])


def test_statistics_follow_the_masks(explorer_and_model):
    ex, *_ = explorer_and_model
    stats = lambda **sel: {s["name"]: s["value"] for s in ex.frame(**sel)["stats"]}  # noqa: E731
    dec = stats(example=0, kind="decoder_self", layer=1, head=1)
    assert dec["future"] == 0  # causal: nothing from later tokens
    assert stats(example=0, kind="encoder", layer=1, head=1)["future"] > 0.1
    assert "previous" not in stats(example=0, kind="cross", layer=1, head=1)


def test_pattern_scores_on_known_matrices():
    T = 4
    prev = torch.zeros(T, T)
    prev[0, 0] = 1
    prev[torch.arange(1, T), torch.arange(T - 1)] = 1  # every query on the previous token
    s = pattern_scores(prev, torch.tensor([False, True, False, False]))
    assert s["previous"] == 1 and s["self"] == 0.25 and s["future"] == 0 and s["max_weight"] == 1
    assert s["delimiter"] == pytest.approx(0.25) and s["entropy"] == pytest.approx(0, abs=1e-9)
    uniform = pattern_scores(torch.full((3, 5), 0.2), square=False)
    assert uniform["entropy"] == pytest.approx(torch.log(torch.tensor(5.0)).item())
    with pytest.raises(ValueError, match="T_q == T_k"):
        pattern_scores(torch.full((3, 5), 0.2))


def test_trait_selection_and_bad_input(explorer_and_model):
    ex, model, src_vocab, tgt_vocab = explorer_and_model
    ex.kind, ex.layer, ex.head = "decoder_self", 3, 4
    assert ex.frame() is ex.spec["frames"]["0|1|2|3"]
    with pytest.raises(ValueError, match="head=5"):
        ex.frame(head=5)
    with pytest.raises(ValueError, match="examples"):
        LayerHeadExplorer(model, [], src_vocab, tgt_vocab)
    unequal = tiny_transformer(len(src_vocab), len(tgt_vocab), num_encoder_layers=1)
    with pytest.raises(ValueError, match="as many encoder as decoder layers"):
        LayerHeadExplorer(unequal, EXAMPLES, src_vocab, tgt_vocab)
    fig = ex.figure([{"kind": "encoder"}, {"kind": "cross"}])
    assert len(fig.axes) >= 4
