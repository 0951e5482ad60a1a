"""Seq2seq with and without attention: the headline numbers of chapters 3 and 4.

The same recipes as the notebooks (course_lib.seq2seq, one-cycle Adam, batches grouped
by length, seed 0), so the numbers should match the chapters' up to BLAS differences.
"""

import time

import torch

from common import record
from course_lib import data, seq2seq as S, train


def _train(model, tensors, steps, batch_size=64, lr=1e-2):
    batches = data.length_batches(tensors, batch_size, seed=0)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=steps,
                                                   pct_start=0.2)
    return train.fit(model, S.seq2seq_loss, lambda step: next(batches), steps=steps,
                     optimizer=optimizer, scheduler=schedule, progress=False)


def _dates():
    train_pairs, test_pairs = data.date_pairs(20000, seed=1), data.date_pairs(1000, seed=2)
    src = data.Vocab.from_text([s for s, _ in train_pairs])
    tgt = data.Vocab.from_text([t for _, t in train_pairs])
    return data.encode_pairs(train_pairs, src, tgt), test_pairs, src, tgt


def _one_thread(fn):
    def wrapped(args):
        before = torch.get_num_threads()
        torch.set_num_threads(1)  # tiny models: faster on one thread (as in the notebooks)
        try:
            return fn(args)
        finally:
            torch.set_num_threads(before)
    wrapped.__name__ = fn.__name__
    return wrapped


@_one_thread
def dates_attention_exact_match(args):
    """Chapter 4's date model: Luong decoder, concat score, 400 steps."""
    tensors, test_pairs, src, tgt = _dates()
    train.seed_everything(0)
    model = S.build_model(len(src), len(tgt), attention="luong", score="concat", hidden_size=64, emb_size=32)
    start = time.perf_counter()
    _train(model, tensors, 400)
    seconds = time.perf_counter() - start
    result = S.evaluate(model, test_pairs, src, tgt)
    return [record("dates_attention_exact_match", result["exact_match"], "fraction"),
            record("dates_attention_train_seconds", seconds, "s")]


@_one_thread
def score_function_exact_match(args):
    """Chapter 4's table: every score at an equal budget of 100 steps on dates."""
    tensors, test_pairs, src, tgt = _dates()
    variants = {"bahdanau_concat": ("bahdanau", "concat")}
    variants.update({f"luong_{name}": ("luong", name) for name in S.SCORES})
    records = []
    for label, (kind, score) in variants.items():
        train.seed_everything(0)
        model = S.build_model(len(src), len(tgt), attention=kind, score=score, hidden_size=64,
                              emb_size=32, max_src_len=31)
        _train(model, tensors, 100)
        records.append(record(f"score_function_exact_match/{label}",
                              S.evaluate(model, test_pairs, src, tgt)["exact_match"], "fraction"))
    return records


@_one_thread
def bottleneck_accuracy(args):
    """Chapter 4's headline plot: copy task, lengths 1-30, 400 steps, per-position accuracy."""
    vocab = data.Vocab.from_text("abcdefghijklmnopqrstuvwxyz")
    tensors = data.encode_pairs(data.copy_pairs(20000, seed=1, min_len=1, max_len=30), vocab, vocab)
    records = []
    for label, attention, score in [("no_attention", None, None), ("luong_dot", "luong", "dot")]:
        train.seed_everything(0)
        model = S.build_model(len(vocab), len(vocab), attention=attention, score=score,
                              hidden_size=64, emb_size=32)
        _train(model, tensors, 400)
        for n in (10, 20, 30):
            held_out = data.copy_pairs(200, seed=100 + n, min_len=n, max_len=n)
            acc = S.evaluate(model, held_out, vocab, vocab)["position_accuracy"]
            records.append(record(f"bottleneck_accuracy/{n}/{label}", acc, "fraction"))
    return records


BENCHMARKS = [
    ("Seq2seq: dates with Luong attention (held-out exact match, 400 steps)", dates_attention_exact_match),
    ("Seq2seq: every score function at an equal budget (dates, 100 steps, held-out exact match)",
     score_function_exact_match),
    ("Seq2seq: copy accuracy by input length, with and without attention (400 steps)", bottleneck_accuracy),
]
