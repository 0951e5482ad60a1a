"""The training recipe of the encoder-decoder Transformer (chapter 9).

    transformer_loss(model, batch)        cross-entropy of every target position, padding ignored
    TransformerRecipe, TRANSFORMER_RECIPE how train_transformer trains: shuffled batches, Adam, a
                                          one-cycle or the paper's inverse-square-root schedule,
                                          label smoothing, gradients clipped to norm 1
    train_transformer(model, pairs, ...)  -> the `train.History` of `train.fit`
    inverse_sqrt_warmup(optimizer, warmup)   the learning-rate shape of Vaswani et al. (2017)

Seed the model's initialisation yourself (`train.seed_everything(seed)` before building it);
`seed` here seeds the order of the batches.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from . import data
from ._checks import check_choice, check_int
from .train import fit, one_cycle

__all__ = ["transformer_loss", "TransformerRecipe", "TRANSFORMER_RECIPE", "train_transformer",
           "inverse_sqrt_warmup"]


def transformer_loss(model, batch, label_smoothing=0.0, pad_id=0):
    """Cross-entropy of every target position (padding ignored) of a `transformer.Transformer`."""
    logits = model(batch["src"], batch["tgt_in"])  # (B, T, V)
    return F.cross_entropy(logits.flatten(0, 1), batch["tgt_out"].flatten(), ignore_index=pad_id,
                           label_smoothing=label_smoothing)


@dataclass(frozen=True)
class TransformerRecipe:
    """How `train_transformer` trains an encoder-decoder Transformer (chapter 9's recipe).

    batch_size shuffled pairs a step; Adam (betas, adam_eps); schedule "one_cycle" (a warm-up
    over a fraction `warmup` of the steps up to lr, then a cosine decay: torch's OneCycleLR), or
    "inverse_sqrt" (the paper's shape, `inverse_sqrt_warmup`, peaking at lr after that fraction);
    cross-entropy with `label_smoothing` (the paper: 0.1); gradients clipped to norm 1. Change one
    field with `dataclasses.replace(TRANSFORMER_RECIPE, lr=1e-3)`.
    """

    batch_size: int = 64
    lr: float = 3e-3
    warmup: float = 0.1
    betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 1e-8
    schedule: str = "one_cycle"
    label_smoothing: float = 0.0

    def __post_init__(self):
        check_int("batch_size", self.batch_size, minimum=1)
        check_choice("schedule", self.schedule, ("one_cycle", "inverse_sqrt"))


TRANSFORMER_RECIPE = TransformerRecipe()


def train_transformer(model, pairs, src_vocab, tgt_vocab, steps, recipe=TRANSFORMER_RECIPE, *, seed=0,
                      eval_fn=None, eval_every=0, progress=True, desc=None):
    """Train a `transformer.Transformer` on (source, target) string pairs with `recipe` (a
    TransformerRecipe): `transformer_loss` on shuffled batches (`data.batches`)."""
    check_int("steps", steps)
    if not isinstance(recipe, TransformerRecipe):
        raise TypeError(f"recipe must be a TransformerRecipe, got {type(recipe).__name__} "
                        f"(e.g. dataclasses.replace(transformer_train.TRANSFORMER_RECIPE, lr=...))")
    r = recipe
    tensors = data.encode_pairs(pairs, src_vocab, tgt_vocab)
    batches = data.batches({k: v for k, v in tensors.items() if k != "src_len"}, r.batch_size,
                           seed=seed)
    if r.schedule == "one_cycle":
        optimizer, scheduler = one_cycle(model, r.lr, steps, r.warmup, r.betas)
        for group in optimizer.param_groups:
            group["eps"] = r.adam_eps
    else:
        optimizer = torch.optim.Adam(model.parameters(), lr=r.lr, betas=r.betas, eps=r.adam_eps)
        scheduler = inverse_sqrt_warmup(optimizer, max(1, round(r.warmup * steps)))

    def loss_fn(m, batch):
        return transformer_loss(m, batch, r.label_smoothing, src_vocab.pad_id)
    return fit(model, loss_fn, lambda step: next(batches), steps=steps, optimizer=optimizer,
               scheduler=scheduler, eval_fn=eval_fn, eval_every=eval_every, progress=progress,
               desc=desc)


def inverse_sqrt_warmup(optimizer, warmup):
    """The learning-rate shape of Vaswani et al. (2017), normalised to peak at the optimiser's lr:
    a linear rise over `warmup` steps, then a decay as 1/sqrt(step). A `LambdaLR` stepped once
    per optimiser step."""
    check_int("warmup", warmup)
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda i: min((i + 1) / warmup, (warmup / (i + 1)) ** 0.5))
