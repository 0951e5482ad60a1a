"""course_lib.charlm: the character-level language model and text generation through
course_lib.decoding."""

import pytest
import torch

from course_lib import decoding
from course_lib.charlm import CharLM, generate


def test_charlm_shapes_state_and_errors():
    model = CharLM(10, "lstm", embed_size=4, hidden_size=6, forget_bias=1.0)
    x = torch.randint(0, 10, (3, 5))
    logits, (h, c) = model(x, return_state=True)
    assert logits.shape == (3, 5, 10) and h.shape == c.shape == (1, 3, 6)
    # reading in two pieces, carrying the state, equals reading at once
    first, state = model(x[:, :2], return_state=True)
    assert torch.allclose(torch.cat([first, model(x[:, 2:], state)], 1), logits, atol=1e-6)
    assert torch.all(model.rnn.bias_ih_l0[6:12] == 1) and torch.all(model.rnn.bias_hh_l0[6:12] == 0)
    with pytest.raises(ValueError, match=r"cell must be one of \['rnn', 'lstm', 'gru'\], got 'transformer'"):
        CharLM(10, "transformer")
    with pytest.raises(ValueError, match="forget_bias is for cell='lstm' only"):
        CharLM(10, "gru", forget_bias=1.0)
    with pytest.raises(TypeError, match="x must hold integer token ids"):
        model(torch.randn(3, 5))
    with pytest.raises(ValueError, match=r"x has ids outside \[0, 10\)"):
        model(torch.full((1, 2), 10))
    with pytest.raises(ValueError, match="vocab_size must be a positive int"):
        CharLM(0)


@pytest.mark.parametrize("cell", ["rnn", "gru", "lstm"])
def test_decoding_steps_equal_reading_the_whole_text(cell):
    """start + step (the decoding protocol, state batch first) give the logits of a full pass."""
    torch.manual_seed(1)
    model = CharLM(9, cell, embed_size=4, hidden_size=5, num_layers=2).eval()
    x = torch.randint(0, 9, (3, 6))
    full = model(x)
    y, state = model.start(x[:, :3])  # reads x[:, :2]; y = x[:, 2]
    for t in range(2, 6):
        logits, state = model.step(y, state)  # after reading x[:, :t + 1]
        assert torch.allclose(logits, full[:, t], atol=1e-6)
        y = x[:, t + 1] if t + 1 < 6 else None
    assert (state[0] if cell == "lstm" else state).shape == (3, 2, 5)  # (N, layers, H)


def test_beam_search_over_a_charlm_reorders_its_state():
    """Beam search reorders the (batch-first) state; a beam of one is greedy decoding."""
    torch.manual_seed(2)
    model = CharLM(6, "lstm", embed_size=4, hidden_size=5).eval()
    prompt = torch.randint(0, 6, (2, 3))
    y0, state = model.start(prompt)
    greedy, lp = decoding.greedy(model.step, y0, state, 5)
    beams, lp_beams = decoding.beam_search(model.step, y0, state, 5, beam_size=1)
    assert torch.equal(beams[:, 0], greedy) and torch.allclose(lp_beams[:, 0], lp, atol=1e-5)
    _, lp_wide = decoding.beam_search(model.step, y0, state, 5, beam_size=4)
    assert torch.all(lp_wide[:, 0] >= lp - 1e-5)  # a wider beam finds a likelier output


def test_generate_is_seeded_and_greedy_is_deterministic(tiny_lm):
    model, vocab, _ = tiny_lm
    a = generate(model, vocab, "the ", 30, num_samples=2, generator=torch.Generator().manual_seed(3))
    b = generate(model, vocab, "the ", 30, num_samples=2, generator=torch.Generator().manual_seed(3))
    assert a == b and len(a) == 2 and all(s.startswith("the ") and len(s) <= 34 for s in a)
    g1, g2 = (generate(model, vocab, "the ", 20, temperature=0.0, num_samples=2) for _ in range(2))
    assert g1 == g2 and g1[0] == g1[1]
    top1 = generate(
        model, vocab, "the ", 20, top_k=1, num_samples=2, generator=torch.Generator().manual_seed(4)
    )
    assert top1 == g1  # sampling among the single most likely character is greedy decoding
    assert generate(model, vocab, "t", 0) == ["t"]
    with pytest.raises(ValueError, match="prompt"):
        generate(model, vocab, "", 5)


def _bench_rnn():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import bench_rnn

    return bench_rnn


def test_chapter_2_sweep_follows_the_recipe():
    from course_lib.charlm import CHAR_LM_RECIPE

    spec = _bench_rnn().SWEEPS["charlm_equal_params"]
    assert spec.config["budgets"] == list(CHAR_LM_RECIPE["budgets"])
    assert spec.config["lr"] == CHAR_LM_RECIPE["lr"]
    assert spec.config["steps"] == max(CHAR_LM_RECIPE["budgets"])
    recipe_points = [p for p in spec.points if p["gate_bias"] is not None or p["cell"] == "rnn"]
    assert [p["cell"] for p in recipe_points] == list(CHAR_LM_RECIPE["cells"])
    for p in spec.points:
        options = CHAR_LM_RECIPE["cells"][p["cell"]]
        assert p["hidden_size"] == options["hidden_size"]
        assert p["gate_bias"] in (None, options.get("gate_bias"))
    assert all(
        f"{split}_bpc_{b}" in spec.metrics for b in CHAR_LM_RECIPE["budgets"] for split in ("val", "test")
    )


def test_chapter_2_cells_have_about_the_same_number_of_parameters():
    from course_lib.charlm import CHAR_LM_RECIPE

    counts = {
        cell: sum(p.numel() for p in CharLM(104, cell, 32, options["hidden_size"]).parameters())
        for cell, options in CHAR_LM_RECIPE["cells"].items()
    }
    assert max(counts.values()) / min(counts.values()) < 1.005, counts


@pytest.mark.slow
def test_chapter_2_sweep_run_reports_every_evaluation_step():
    spec = _bench_rnn().SWEEPS["charlm_equal_params"]
    torch.set_num_threads(1)
    point = {"cell": "gru", "hidden_size": 16, "gate_bias": 1.0}
    out = _bench_rnn().charlm_run(point, 0, dict(spec.config, steps=4, eval_every=2))
    assert set(out) == {"val_bpc_2", "test_bpc_2", "val_bpc_4", "test_bpc_4", "parameters"}
    bpc = {k: v for k, v in out.items() if k != "parameters"}
    assert all(2.0 < v < 8.0 for v in bpc.values()), out  # below log2(V) after 4 steps, far from trained
