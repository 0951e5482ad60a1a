"""Unit tests of chapter 9's experiments (course_lib.pages.transformer_experiments): the splits, the
layer-norm test bed, the head patterns and the logit lens, on tiny untrained models."""

import math

import pytest
import torch

from course_lib.pages import transformer_experiments as TX
from course_lib.widgets import pattern_scores
from tiny_models import tiny_transformer

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def dates():
    return TX.date_task()


def test_date_task_keeps_validation_and_held_out_pairs_out_of_training(dates):
    seen = set(dates.train)
    assert (len(dates.train), len(dates.val), len(dates.test)) == (12000, 500, 1000)
    assert not seen & set(dates.test) and not seen & set(dates.val) and not set(dates.val) & set(dates.test)
    assert max(len(t) for _, t in dates.train) + 1 == dates.max_len  # a target and its <eos>


def test_reversal_task_shares_one_vocabulary_and_drops_seen_strings():
    task = TX.reversal_task()
    assert task.src_vocab is task.tgt_vocab
    assert not set(task.train) & set(task.test) and all(t == s[::-1] for s, t in task.test)
    assert max(len(t) for _, t in task.train) + 1 == task.max_len


@pytest.mark.parametrize("norm_first", [False, True])
def test_labeller_has_a_final_norm_only_in_pre_ln(norm_first):
    model = TX.Labeller(norm_first, layers=3)
    assert (model.encoder.norm is not None) == norm_first
    x, y = TX.reversal_batches(0)(1)
    assert x.shape == (32, 8) and torch.equal(y, x.flip(1))
    assert model(x).shape == (32, 8, 16)
    loss = TX.labelling_loss(model, (x, y)).item()
    assert abs(loss - math.log(16)) < 0.5  # near chance at initialisation


def test_init_gradient_norms_has_one_positive_norm_per_layer():
    g = TX.init_gradient_norms(False, 3, seed=0)
    assert len(g["layer"]) == len(g["ffn"]) == 3
    assert all(0 < f < l for f, l in zip(g["ffn"], g["layer"]))  # W2 is a part of its layer
    assert g == TX.init_gradient_norms(False, 3, seed=0)  # seeded


def test_head_patterns_match_pattern_scores_of_the_explorer(dates):
    model = tiny_transformer(len(dates.src_vocab), len(dates.tgt_vocab))
    pairs = dates.test[:5]
    p = TX.head_patterns(model, dates, pairs)
    assert p["previous"].shape == p["delimiter"].shape == p["copy"].shape == (2, 4)
    assert p["uniform"] == pytest.approx(sum(1 / len(s) for s, _ in pairs) / 5)
    assert p["n_copy"] == sum(s.rfind(t[:4]) >= 0 for s, t in pairs)
    expected = {"previous": torch.zeros(2, 4), "delimiter": torch.zeros(2, 4)}
    for s, t in pairs:  # the explorer's own per-head statistics, one example at a time
        model(torch.tensor([dates.src_vocab.encode(s)]), torch.tensor([dates.tgt_vocab.encode(t, bos=True)]))
        is_delim = torch.tensor([c in TX.DELIMITERS for c in s])
        for layer, w in enumerate(model.attention_weights()["encoder"]):
            for head in range(4):
                scores = pattern_scores(w[0, head], is_delim)
                expected["previous"][layer, head] += scores["previous"] / 5
                expected["delimiter"][layer, head] += scores["delimiter"] / 5
    for name in expected:
        assert torch.allclose(p[name], expected[name], atol=1e-6), name


def test_logit_lens_at_the_top_is_the_model_s_own_teacher_forced_accuracy(dates):
    model = tiny_transformer(len(dates.src_vocab), len(dates.tgt_vocab), seed=1)
    pairs = dates.test[:20]
    readout = TX.logit_lens(model, dates, pairs)
    assert len(readout) == 3
    batch = TX.data.encode_pairs(pairs, dates.src_vocab, dates.tgt_vocab)
    with torch.no_grad():
        right = model(batch["src"], batch["tgt_in"]).argmax(-1) == batch["tgt_out"]
    assert readout[-1] == pytest.approx(right[batch["tgt_out"] != 0].float().mean().item())


def test_head_means_and_ablation_tables_have_one_entry_per_head(dates):
    model = tiny_transformer(len(dates.src_vocab), len(dates.tgt_vocab))
    means = TX.head_means(model, dates, dates.train[:8])
    assert {k: [m.shape for m in v] for k, v in means.items()} == {k: [(16,), (16,)] for k in TX.ATTENTIONS}
    table = TX.head_ablation(model, dates, dates.test[:4], "mean", means)
    assert all(t.shape == (2, 4) and ((t >= 0) & (t <= 1)).all() for t in table.values())
    with pytest.raises(ValueError, match="method must be"):
        TX.head_ablation(model, dates, dates.test[:4], "random")
