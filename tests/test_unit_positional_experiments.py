"""Unit tests of chapter 8's experiment helpers (course_lib.pages.positional_experiments): the knobs of
each scheme, the key masks of the interventions, the split of a RoPE score into rotation pairs,
and the model without any positional code."""

import math

import pytest
import torch

from course_lib import attention as A
from course_lib.pages import positional_experiments as PE
from course_lib.positional import apply_rope


@pytest.mark.parametrize(
    ("scheme", "setting", "name"),
    [
        ("sinusoidal", 10000.0, "sinusoidal"),
        ("learned", None, "learned"),
        ("RoPE", 10000.0, "RoPE"),
        ("ALiBi", [1 / 16, 1 / 256], "ALiBi"),
        ("ALiBi", [1 / 2, 1 / 4], "ALiBi_steep"),
    ],
)
def test_build_model_with_the_default_setting_is_the_chapters_model(scheme, setting, name):
    """Same seed -> same initial weights and the same outputs as the POSITION_SCHEMES entry."""
    torch.manual_seed(3)
    built = PE.build_model(scheme, setting).eval()
    torch.manual_seed(3)
    reference = PE.POSITION_SCHEMES[name]().eval()
    x, _ = PE.previous_token(4, 20, torch.Generator().manual_seed(0))
    assert torch.equal(built(x), reference(x))


def test_build_model_uses_its_setting_and_rejects_an_unknown_scheme():
    torch.manual_seed(0)
    model = PE.build_model("sinusoidal", 100.0)
    t = torch.arange(PE.TEST_LEN, dtype=torch.float32)[:, None]
    assert torch.allclose(model.pos.pe[:, 2], torch.sin(t[:, 0] * 100.0 ** (-2 / PE.D_MODEL)), atol=1e-6)
    assert PE.build_model("RoPE", 100.0).rope_base == 100.0
    assert torch.equal(PE.build_model("ALiBi", [0.5, 0.25]).slopes, torch.tensor([0.5, 0.25]))
    with pytest.raises(ValueError, match="scheme must be one of"):
        PE.build_model("absolute", None)


def test_offset_mask_allows_exactly_the_offsets_asked_for():
    T = 7
    t, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    assert torch.equal(PE.offset_mask(T), A.causal_mask(T))
    window = PE.offset_mask(T, 0, 2)
    assert torch.equal(window, (t - j >= 0) & (t - j <= 2))
    assert window.sum().item() == 1 + 2 + 3 * (T - 2)


@pytest.mark.parametrize("name", sorted(PE.POSITION_SCHEMES))
def test_the_default_key_mask_is_the_causal_mask_and_a_narrower_one_changes_the_output(name):
    torch.manual_seed(0)
    model = PE.POSITION_SCHEMES[name]().eval()
    x, _ = PE.previous_token(3, 12, torch.Generator().manual_seed(1))
    logits, weights = model(x, return_weights=True)
    assert torch.equal(logits, model(x)) and torch.equal(logits, model(x, A.causal_mask(12)))
    assert weights.shape == (3, 2, 12, 12)
    assert torch.allclose(weights.sum(-1), torch.ones(3, 2, 12), atol=1e-5)
    narrow_logits, narrow = model(x, PE.offset_mask(12, 0, 2), return_weights=True)
    offset = torch.arange(12)[:, None] - torch.arange(12)[None, :]
    assert narrow[..., offset > 2].abs().max() == 0  # no weight beyond offset 2
    assert not torch.allclose(narrow_logits, logits)


def test_accuracy_per_position_counts_the_right_answers():
    torch.manual_seed(0)
    model = PE.POSITION_SCHEMES["RoPE"]()
    x, y = PE.previous_token(50, 10, torch.Generator().manual_seed(2))
    acc = PE.accuracy_per_position(model, x, y)
    assert not model.training and acc.shape == (10,)
    with torch.no_grad():
        expected = (model(x).argmax(-1) == y).float().mean(0)
    assert torch.equal(acc, expected) and ((acc >= 0) & (acc <= 1)).all()


def test_rope_score_parts_add_up_to_the_scores_of_the_model():
    torch.manual_seed(0)
    model = PE.POSITION_SCHEMES["RoPE"]().eval()
    x, _ = PE.previous_token(5, 9, torch.Generator().manual_seed(3))
    parts = PE.rope_score_parts(model, x)  # (h, T, d_k/2)
    assert parts.shape == (2, 9, PE.D_MODEL // 4)
    with torch.no_grad():
        q, k, _ = model.attn.project(*[model.embed(x)] * 3)
        scores = apply_rope(q) @ apply_rope(k).transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, h, T, T)
    for o in (0, 3, 8):
        t = torch.arange(o, 9)
        expected = scores[:, :, t, t - o].mean((0, 2))  # (h,)
        assert torch.allclose(parts[:, o].sum(-1), expected, atol=1e-5)


def test_no_position_model_is_causal_only_when_asked():
    torch.manual_seed(0)
    x, y = PE.where_am_i(3, torch.Generator().manual_seed(0))
    assert (x[:, 0] == PE.VOCAB).all() and torch.equal(y[0], torch.arange(PE.TRAIN_LEN))
    changed = x.clone()
    changed[:, 9] = (x[:, 9] + 1) % PE.VOCAB
    causal, full = PE.NoPositionModel(causal=True).eval(), PE.NoPositionModel(causal=False).eval()
    a, b = causal(x), causal(changed)
    assert (a[:, :9] - b[:, :9]).abs().max() < 1e-6 and (a[:, 9:] - b[:, 9:]).abs().max() > 1e-6
    assert (full(x)[:, :9] - full(changed)[:, :9]).abs().max() > 1e-6
