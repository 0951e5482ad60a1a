"""The tokens explorer: one frame per (merges, sentence), the tokens and numbers of the
tokenizer with that many merges, a small spec, the static figure, bad input."""

import json

import matplotlib
import pytest

matplotlib.use("Agg")

from course_lib import data
from course_lib.bpe import BPE, train_bpe
from course_lib.widgets import MERGE_OPTIONS, SENTENCES, TokensExplorer, chars_per_token


@pytest.fixture(scope="module")
def setting():
    train, val, _ = data.split_text(data.load_text())
    tok = train_bpe(train, max(MERGE_OPTIONS))
    return tok, val, TokensExplorer(tok, val)


def stats(frame):
    return {s["name"]: s["value"] for s in frame["stats"]}


def test_one_frame_per_combination_and_a_light_spec(setting):
    _, _, ex = setting
    assert len(ex.spec["frames"]) == len(MERGE_OPTIONS) * len(SENTENCES)
    assert len(json.dumps(ex.spec)) < 100_000


@pytest.mark.parametrize("merges", MERGE_OPTIONS)
def test_frames_hold_the_tokens_of_the_tokenizer_with_that_many_merges(setting, merges):
    tok, val, ex = setting
    small = BPE(tok.merges[:merges])
    for i, sentence in enumerate(SENTENCES):
        frame = ex.frame(merges=merges, sentence=i)
        assert frame["tokens"]["ids"] == small.encode(sentence)
        assert frame["tokens"]["tokens"] == small.tokens(sentence)
        s = stats(frame)
        assert s["num_tokens"] == len(small.encode(sentence))
        assert s["vocab_size"] == 256 + merges
        assert s["heldout_chars_per_token"] == pytest.approx(chars_per_token(small, val), abs=1e-6)


def test_zero_merges_is_one_token_per_byte_and_the_tokens_spell_the_sentence(setting):
    _, _, ex = setting
    for i, sentence in enumerate(SENTENCES):
        assert stats(ex.frame(merges=0, sentence=i))["num_tokens"] == len(sentence.encode())
        for merges in MERGE_OPTIONS:
            tokens = ex.frame(merges=merges, sentence=i)["tokens"]["tokens"]
            if not any(t.startswith("<") and t.endswith(">") for t in tokens):
                assert "".join(tokens) == sentence


def test_more_merges_fewer_tokens_and_the_curve_marks_the_current_option(setting):
    _, _, ex = setting
    counts = [stats(ex.frame(merges=m))["num_tokens"] for m in MERGE_OPTIONS]
    assert counts == sorted(counts, reverse=True) and counts[-1] < counts[0] / 3
    curve = ex.frame()["compression"]["values"]
    assert curve == sorted(curve) and 0.99 < curve[0] <= 1.0  # bytes: a few characters take several
    for k, merges in enumerate(MERGE_OPTIONS):
        frame = ex.frame(merges=merges)
        assert frame["compression"]["highlight"] == k
        assert frame["compression"]["values"][k] == pytest.approx(
            stats(frame)["heldout_chars_per_token"], abs=1e-4
        )


def test_traits_select_the_frame_and_the_figure_draws(setting):
    _, _, ex = setting
    ex.merges, ex.sentence = 1024, 2
    assert ex.frame() is ex.spec["frames"][f"{MERGE_OPTIONS.index(1024)}|2"]
    with pytest.raises(ValueError, match="merges=5"):
        ex.frame(merges=5)
    fig = ex.figure([{"merges": 0}, {"merges": 4096, "sentence": 2}])
    assert len(fig.axes) == 6


def test_bad_input(setting):
    tok, val, _ = setting
    with pytest.raises(TypeError, match="tokenizer must be a course_lib.bpe.BPE"):
        TokensExplorer("gpt2", val)
    with pytest.raises(ValueError, match="the explorer needs at least 4096"):
        TokensExplorer(BPE(tok.merges[:100]), val)
    with pytest.raises(ValueError, match="heldout must be a non-empty str"):
        TokensExplorer(tok, "")
    with pytest.raises(ValueError, match="sentences must be non-empty strings"):
        TokensExplorer(tok, val, sentences=["ok", ""])
