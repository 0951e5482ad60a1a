"""The training recipe of the recurrent encoder-decoders (chapters 3 and 4).

    Seq2SeqRecipe(batch_size, lr, warmup)   how train_seq2seq trains: batches of similar source
                                            lengths, Adam with a one-cycle schedule (a warm-up
                                            over a fraction `warmup` of the steps up to lr, then
                                            a cosine decay), gradients clipped to norm 1
    SEQ2SEQ_RECIPE                          the chapters' recipe: 64 pairs a step, lr 0.01, warm-up 0.2
    train_seq2seq(model, pairs, ...)        teacher-forced training with `seq2seq.seq2seq_loss`

Seed the model's initialisation yourself (`train.seed_everything(seed)` before building it);
`seed` here seeds the order of the batches.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import data
from ._checks import check_int
from .seq2seq import seq2seq_loss
from .train import fit, one_cycle

__all__ = ["Seq2SeqRecipe", "SEQ2SEQ_RECIPE", "train_seq2seq"]


@dataclass(frozen=True)
class Seq2SeqRecipe:
    """How `train_seq2seq` trains a recurrent encoder-decoder.

    batch_size pairs of similar source lengths a step (`data.length_batches`); Adam with a
    one-cycle schedule (`train.one_cycle`: a warm-up over a fraction `warmup` of the steps up to
    lr, then a cosine decay); gradients clipped to norm 1. Change one field with
    `dataclasses.replace(SEQ2SEQ_RECIPE, lr=3e-3)`.
    """

    batch_size: int = 64
    lr: float = 1e-2
    warmup: float = 0.2

    def __post_init__(self):
        check_int("batch_size", self.batch_size, minimum=1)


SEQ2SEQ_RECIPE = Seq2SeqRecipe()


def train_seq2seq(model, pairs, src_vocab, tgt_vocab, steps, recipe=SEQ2SEQ_RECIPE, *, seed=0, eval_fn=None,
                  eval_every=0, progress=True, desc=None):
    """Teacher-forced training of a recurrent seq2seq model on (source, target) string pairs with
    `recipe` (a Seq2SeqRecipe): `seq2seq.seq2seq_loss`, batches of similar source lengths
    (`data.length_batches`), Adam with a one-cycle schedule, gradients clipped to norm 1."""
    check_int("steps", steps)
    if not isinstance(recipe, Seq2SeqRecipe):
        raise TypeError(f"recipe must be a Seq2SeqRecipe, got {type(recipe).__name__} "
                        f"(e.g. dataclasses.replace(seq2seq_train.SEQ2SEQ_RECIPE, lr=...))")
    r = recipe
    tensors = data.encode_pairs(pairs, src_vocab, tgt_vocab)
    batches = data.length_batches(tensors, r.batch_size, seed=seed)
    optimizer, scheduler = one_cycle(model, r.lr, steps, r.warmup)
    return fit(model, seq2seq_loss, lambda step: next(batches), steps=steps, optimizer=optimizer,
               scheduler=scheduler, eval_fn=eval_fn, eval_every=eval_every, progress=progress,
               desc=desc)
