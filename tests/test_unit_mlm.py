"""Unit tests of course_lib.mlm: BERT's corruption, a bidirectional model, the loss at the chosen
positions only, the count baseline, and train_mlm learning a text it can fill in."""

import dataclasses
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from course_lib import mlm, train

torch.set_num_threads(1)


def test_mask_tokens_follows_bert_80_10_10():
    x = torch.randint(0, 10, (400, 500))
    inputs, targets = mlm.mask_tokens(x, mask_id=10, rate=0.15, generator=torch.Generator().manual_seed(0))
    chosen = targets != mlm.IGNORE
    masked = (inputs == 10) & chosen
    changed = (inputs != x) & (inputs != 10)
    print(
        f"chosen {chosen.float().mean():.4f}, of them masked {masked.sum() / chosen.sum():.4f}, "
        f"replaced {changed.sum() / chosen.sum():.4f}"
    )
    assert abs(chosen.float().mean().item() - 0.15) < 0.005
    assert abs((masked.sum() / chosen.sum()).item() - 0.8) < 0.01
    # a random replacement equals the original one time in 10 (vocabulary of 10): 0.1 * 0.9
    assert abs((changed.sum() / chosen.sum()).item() - 0.09) < 0.01
    assert torch.equal(targets[chosen], x[chosen])
    assert torch.equal(inputs[~chosen], x[~chosen]), "a position not chosen is left alone"


def test_mask_tokens_without_random_masks_every_chosen_position():
    x = torch.randint(0, 10, (50, 60))
    inputs, targets = mlm.mask_tokens(x, 10, 0.3, torch.Generator().manual_seed(1), keep_random=False)
    chosen = targets != mlm.IGNORE
    assert torch.equal(chosen, inputs == 10)


@pytest.mark.parametrize("rate", [0, -0.1, 1.5])
def test_mask_tokens_names_a_bad_rate(rate):
    with pytest.raises(ValueError, match="rate must be in"):
        mlm.mask_tokens(torch.zeros(2, 3, dtype=torch.long), 5, rate)


def _model(**kw):
    torch.manual_seed(0)
    model = mlm.MaskedLM(vocab_size=11, d_model=16, num_heads=4, num_layers=2, d_ff=32, max_len=12, **kw)
    return model.eval()


def test_masked_lm_sees_both_sides():
    model = _model()
    x = torch.randint(0, 11, (2, 9))
    changed = x.clone()
    changed[:, 6] = model.mask_id  # the [MASK] id is read
    a, b = model(x), model(changed)
    assert a.shape == (2, 9, 11)
    print(f"change at position 0 from a token at 6: {(a[:, 0] - b[:, 0]).abs().max():.2e}")
    assert (a[:, :6] - b[:, :6]).abs().max() > 1e-4, "earlier positions must see a later token"


def test_masked_lm_names_an_id_beyond_the_mask_id():
    with pytest.raises(ValueError, match=r"idx has ids outside \[0, 12\)"):
        _model()(torch.tensor([[0, 12]]))


def test_mlm_loss_counts_the_chosen_positions_only():
    model = _model()
    inputs = torch.randint(0, 12, (3, 8))
    targets = torch.full((3, 8), mlm.IGNORE)
    targets[0, 2], targets[2, 5] = 4, 7
    logits = model(inputs)
    expected = F.cross_entropy(torch.stack([logits[0, 2], logits[2, 5]]), torch.tensor([4, 7]))
    assert torch.allclose(mlm.mlm_loss(model, (inputs, targets)), expected)


def test_neighbour_baseline_and_accuracy_on_a_toy_text():
    train_ids = torch.tensor([0, 1, 2, 0, 1, 2, 0, 3, 2, 0, 1, 2])  # between 0 and 2: 1 (3 times), 3 (once)
    baseline = mlm.NeighbourBaseline(train_ids, vocab_size=4)
    assert mlm.unigram_guess(train_ids, 4) in (0, 2)  # 0 and 2 are the most frequent
    x = torch.tensor([[0, 3, 2, 0, 1]])
    targets = torch.tensor([[mlm.IGNORE, 3, mlm.IGNORE, mlm.IGNORE, mlm.IGNORE]])
    assert baseline(x).argmax(-1)[0, 1].item() == 1  # guesses 1 where 3 stands
    assert mlm.masked_accuracy(baseline, x, targets) == 0.0
    targets[0, 1] = 1
    assert mlm.masked_accuracy(baseline, x, targets) == 1.0


def test_heldout_masked_names_a_text_too_short():
    with pytest.raises(ValueError, match="fewer than seq_len"):
        mlm.heldout_masked(torch.arange(100), 64, 2, mask_id=100)


def test_train_mlm_learns_to_fill_in_a_periodic_text():
    text = torch.arange(6).repeat(500)  # 0 1 2 3 4 5 0 1 ...: any one neighbour decides the gap
    corpus = SimpleNamespace(train=text, val=text)
    torch.manual_seed(0)
    model = mlm.MaskedLM(6, d_model=32, num_heads=2, num_layers=1, d_ff=64, max_len=16)
    _, inputs, targets = mlm.heldout_masked(text, 16, 20, model.mask_id, seed=1)
    before = mlm.masked_accuracy(model.eval(), inputs, targets)
    history = mlm.train_mlm(
        model,
        corpus,
        150,
        dataclasses.replace(train.GPT_RECIPE, batch_size=16, seq_len=16, lr=3e-3, warmup=10),
        eval_fn=lambda m: mlm.masked_accuracy(m, inputs, targets),
        progress=False,
    )
    after = history.evals[-1][1]
    print(f"masked-token accuracy before {before:.2f}, after 150 steps {after:.2f}")
    assert after > 0.95 and before < 0.5
