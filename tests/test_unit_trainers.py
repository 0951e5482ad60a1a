"""Each family's trainer (train.train_lm, charlm.train_char_lm, seq2seq_train.train_seq2seq,
transformer_train.train_transformer) trains its model on a tiny task, deterministically for a seed,
with the schedule it documents."""

import dataclasses
import math

import pytest
import torch

from course_lib import charlm, data, seq2seq_train, train, transformer_train
from course_lib import seq2seq as S
from course_lib.charlm import CharLM
from course_lib.gpt import GPT, GPTConfig
from course_lib.train import lm_heldout_loss, seed_everything
from course_lib.transformer import Transformer, TransformerConfig, greedy_decode


@pytest.fixture(scope="module")
def corpus():
    return data.char_corpus("the cat sat on the mat. the dog sat on the log. " * 800)


def test_warmup_cosine_rises_then_decays_to_the_floor():
    steps, warmup = 100, 10
    lr = [train.warmup_cosine(s, steps, warmup, 0.1) for s in range(steps)]
    assert lr[0] == pytest.approx(0.1) and lr[warmup - 1] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(lr[warmup:], lr[warmup + 1 :]))  # then only down
    assert lr[-1] == pytest.approx(0.1, abs=1e-3)


def test_train_char_lm_learns_and_is_reproducible(corpus, one_thread):
    runs = [
        charlm.train_char_lm(
            "gru",
            corpus,
            steps=60,
            recipe=train.LMRecipe(batch_size=16, seq_len=16),
            hidden_size=32,
            eval_every=30,
            seed=1,
            progress=False,
        )
        for _ in range(2)
    ]
    (_, history), (_, again) = runs
    assert history.train_loss == again.train_loss  # the seed fixes the init and the batches
    first, last = history.evals[0][1], history.evals[-1][1]
    assert [s for s, _ in history.evals] == [30, 60]
    assert last < first and last < 0.7 * math.log(len(corpus.vocab)), (first, last)


def test_train_char_lm_sets_the_memory_gate_bias(corpus, one_thread):
    for cell in ("gru", "lstm"):
        model, _ = charlm.train_char_lm(
            cell,
            corpus,
            steps=1,
            recipe=train.LMRecipe(lr=0.0),
            hidden_size=8,
            gate_bias=1.5,
            progress=False,
        )
        both = model.rnn.bias_ih_l0[8:16] + model.rnn.bias_hh_l0[8:16]  # the z or the f block
        assert torch.allclose(both, torch.full((8,), 1.5))
    with pytest.raises(ValueError, match="gate_bias is for cell='lstm' or 'gru'"):
        charlm.train_char_lm("rnn", corpus, steps=1, gate_bias=1.0, progress=False)


def test_train_lm_with_the_gpt_recipe(corpus, one_thread):
    seed_everything(0)
    gpt = GPT(GPTConfig(vocab_size=len(corpus.vocab), block_size=32, n_layer=1, n_head=4, n_embd=32))
    recipe = dataclasses.replace(train.GPT_RECIPE, seq_len=32, warmup=10)
    history = train.train_lm(
        gpt, corpus, 120, recipe, progress=False, eval_fn=lambda m: lm_heldout_loss(m, corpus.val, seq_len=32)
    )
    nats = history.evals[-1][1]
    assert nats < 0.6 * math.log(len(corpus.vocab)), nats
    with pytest.raises(ValueError, match="optimizer must be one of"):
        train.LMRecipe(optimizer="sgd")
    with pytest.raises(TypeError, match="recipe must be an LMRecipe"):
        train.train_lm(gpt, corpus, 1, dict(lr=1e-3))


def test_train_seq2seq_learns_to_copy(one_thread):
    vocab = data.Vocab.from_text("abcdef")
    pairs = data.copy_pairs(2000, seed=0, min_len=1, max_len=4, alphabet="abcdef")
    held_out = data.copy_pairs(200, seed=1, min_len=1, max_len=4, alphabet="abcdef")
    seed_everything(0)
    model = S.build_model(
        len(vocab), len(vocab), attention="luong", score="dot", hidden_size=32, embed_size=16
    )
    seq2seq_train.train_seq2seq(model, pairs, vocab, vocab, steps=200, progress=False)
    metrics = S.evaluate(model, held_out, vocab, vocab)
    assert metrics["exact_match"] > 0.9, metrics


@pytest.mark.slow
def test_train_transformer_learns_to_reverse(one_thread):
    vocab = data.Vocab.from_text("abcdef")
    pairs = [(s, s[::-1]) for s, _ in data.copy_pairs(3000, seed=0, min_len=2, max_len=5, alphabet="abcdef")]
    held_out = [
        (s, s[::-1]) for s, _ in data.copy_pairs(200, seed=1, min_len=2, max_len=5, alphabet="abcdef")
    ]
    seed_everything(0)
    config = TransformerConfig(len(vocab), len(vocab), 32, 4, 1, 1, d_ff=64, dropout=0.0)
    model = Transformer(config)
    recipe = transformer_train.TransformerRecipe(label_smoothing=0.05)
    transformer_train.train_transformer(model, pairs, vocab, vocab, 250, recipe, progress=False)
    src = data.encode_pairs(held_out, vocab, vocab)["src"]
    out = greedy_decode(model, src, 7, vocab.bos_id, vocab.eos_id)
    exact = sum(vocab.decode(row) == t for row, (_, t) in zip(out.tolist(), held_out)) / len(held_out)
    assert exact > 0.9, exact


def test_stream_batches_continue_each_row_where_it_stopped():
    ids = torch.arange(1000)
    batch = train.stream_batches(ids, batch_size=4, seq_len=10)
    (x1, y1, restart1), (x2, _, restart2) = batch(1), batch(2)
    assert restart1 and not restart2
    assert torch.equal(x1[:, 0], torch.tensor([0, 249, 498, 747]))  # 4 streams of 249 characters
    assert torch.equal(x2[:, 0], x1[:, -1] + 1) and torch.equal(y1, x1 + 1)
    windows = 249 // 10
    assert batch(windows + 1)[2] and torch.equal(batch(windows + 1)[0], x1)  # the next pass
    with pytest.raises(ValueError, match="not longer than seq_len"):
        train.stream_batches(torch.arange(50), batch_size=8, seq_len=10)


def test_stateful_training_carries_the_state(one_thread):
    corpus = data.char_corpus("the cat sat on the mat.\nthe dog sat on the log.\n" * 600)
    seen = []

    class Spy(torch.nn.Module):  # records the state each batch starts from
        def __init__(self):
            super().__init__()
            self.lm = CharLM(len(corpus.vocab), "gru", embed_size=8, hidden_size=8)

        def forward(self, x, hx=None, return_state=False):
            if return_state:
                seen.append(hx)
            return self.lm(x, hx, return_state)

    seed_everything(0)
    recipe = train.LMRecipe(batch_size=4, seq_len=8)
    train.train_lm(Spy(), corpus, 3, recipe, stateful=True, progress=False)
    assert seen[0] is None and seen[1] is not None and not seen[1].requires_grad
    assert seen[1].shape == (1, 4, 8)
