"""One training recipe per model family, shared by the chapters and `benchmarks/`.

A recipe is everything that turns a model and data into a trained model: the loss, the
batches, the optimiser, the learning-rate schedule, the clipping, the seeds. Writing it once
here means a chapter and its benchmark train the same way.

    train_lm           next-character language models (the RNNs of chapter 2, the GPT of chapter 10),
                       with an LMRecipe (GPT_RECIPE: nanoGPT's), on random windows or, stateful,
                       on consecutive windows of parallel streams
    train_char_lm      chapter 2's recipe: a CharLM built and trained with train_lm
    train_seq2seq      recurrent encoder-decoders (chapters 3 and 4)
    train_transformer  the encoder-decoder Transformer (chapter 9)
    train_mlm          the masked language model of chapter 10, BERT's way

Each returns the `course_lib.train.History` of `fit` (train_char_lm also the model). Seed the
model's initialisation yourself (`seed_everything(seed)` before building it); `seed` here
seeds the order of the batches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from . import data
from ._checks import check_choice, check_int
from .charlm import CharLM
from .mlm import mask_tokens, mlm_loss
from .rnn import set_forget_bias, set_update_bias
from .seq2seq import seq2seq_loss
from .train import fit, lm_heldout_loss, seed_everything

__all__ = ["lm_loss", "warmup_cosine", "stream_batches", "LMRecipe", "train_lm", "GPT_RECIPE",
           "CHAR_LM_RECIPE", "train_char_lm", "train_seq2seq", "transformer_loss", "TransformerRecipe",
           "TRANSFORMER_RECIPE", "train_transformer",
           "train_mlm"]


# ---------------------------------------------------------------------------
# Language models
# ---------------------------------------------------------------------------

def lm_loss(model, batch):
    """Mean cross-entropy of the next character, in nats: batch = (x, y), each (B, T)."""
    x, y = batch
    return F.cross_entropy(model(x).flatten(0, 1), y.flatten())


def warmup_cosine(step, steps, warmup, min_ratio):
    """Learning-rate multiplier: linear warm-up over `warmup` steps, then a cosine decay to
    min_ratio at the last step (nanoGPT's schedule)."""
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(steps - warmup, 1)
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))


def stream_batches(ids, batch_size, seq_len):
    """Batches for stateful training (Karpathy's char-rnn): the text is cut into batch_size
    streams, and batch k holds the k-th window of seq_len characters of every stream, so that
    each row continues where the same row of the previous batch stopped.

    -> a function step -> (x (B, T), y (B, T), restart): restart is True when the streams
    start again from their beginnings (then a carried state must be dropped).
    """
    n = (len(ids) - 1) // batch_size  # characters per stream
    if n <= seq_len:
        raise ValueError(f"{len(ids)} characters make streams of {n}, not longer than seq_len={seq_len}")
    starts = torch.arange(batch_size)[:, None] * n  # (B, 1)
    windows = n // seq_len  # windows per pass over the streams
    offsets = torch.arange(seq_len + 1)  # (T+1,)

    def batch(step):
        k = (step - 1) % windows
        w = ids[starts + k * seq_len + offsets]  # (B, T+1)
        return w[:, :-1], w[:, 1:], k == 0
    return batch


@dataclass(frozen=True)
class LMRecipe:
    """How `train_lm` trains a language model: the batches, the optimiser, the schedule.

    batch_size windows of seq_len characters (or tokens) a step; optimizer "adam", or "adamw"
    (decoupled weight decay on the weight matrices only, as nanoGPT); schedule "constant", or
    "cosine" (`warmup_cosine`: `warmup` steps up to lr, then down to min_lr); gradients clipped
    to norm `clip`. The defaults are chapter 2's: Adam at 0.01, constant. Change one field with
    `dataclasses.replace(GPT_RECIPE, lr=4e-3)`.
    """

    batch_size: int = 32
    seq_len: int = 64
    lr: float = 1e-2
    optimizer: str = "adam"
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    schedule: str = "constant"
    warmup: int = 0
    min_lr: float = 0.0
    clip: float = 1.0

    def __post_init__(self):
        check_int("batch_size", self.batch_size, minimum=1)
        check_int("seq_len", self.seq_len, minimum=1)
        check_choice("optimizer", self.optimizer, ("adam", "adamw"))
        check_choice("schedule", self.schedule, ("constant", "cosine"))


def _optimizer(model, recipe, steps):
    """The optimiser and learning-rate scheduler (None when constant) of an LMRecipe."""
    if not isinstance(recipe, LMRecipe):
        raise TypeError(f"recipe must be an LMRecipe, got {type(recipe).__name__} "
                        f"(e.g. dataclasses.replace(recipes.GPT_RECIPE, lr=...))")
    r = recipe
    if r.optimizer == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=r.lr, betas=r.betas)
    else:
        matrices = [p for p in model.parameters() if p.dim() >= 2]
        others = [p for p in model.parameters() if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": matrices, "weight_decay": r.weight_decay},
                                 {"params": others, "weight_decay": 0.0}], lr=r.lr, betas=r.betas)
    scheduler = None
    if r.schedule == "cosine":
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda step: warmup_cosine(step, steps, r.warmup, r.min_lr / r.lr))
    return opt, scheduler


def train_lm(model, corpus, steps, recipe=LMRecipe(), *, seed=0, eval_fn=None, eval_every=0,
             stateful=False, progress=True, desc=None):
    """Train a next-character model with `recipe` (an LMRecipe) on random windows of
    corpus.train (`data.lm_batch`), or, with stateful=True, on consecutive windows of parallel
    streams (`stream_batches`) with the recurrent state carried from one batch to the next and
    the gradient cut at the window's start (truncated backpropagation through time, as char-rnn
    trains; the model must accept model(x, state, return_state=True), as CharLM does).

    Every `eval_every` steps and at the end, history.evals records eval_fn(model): by default
    the held-out loss (nats per character) of corpus.val read in windows of 256 characters
    (`train.lm_heldout_loss`).
    """
    check_int("steps", steps)
    r = recipe
    g = torch.Generator().manual_seed(seed)
    opt, scheduler = _optimizer(model, r, steps)
    loss_fn, batches = lm_loss, lambda step: data.lm_batch(corpus.train, r.batch_size, r.seq_len, g)
    if stateful:
        loss_fn, batches = _carried_state_loss(), stream_batches(corpus.train, r.batch_size, r.seq_len)
    return fit(model, loss_fn, batches, steps=steps, optimizer=opt, scheduler=scheduler, clip=r.clip,
               eval_fn=eval_fn or (lambda m: lm_heldout_loss(m, corpus.val, seq_len=256)),
               eval_every=eval_every, progress=progress, desc=desc)


def _carried_state_loss():
    """lm_loss for stateful batches (x, y, restart): the state left by the previous batch is
    the next one's start, detached (no gradient flows into the previous window)."""
    carry = {"state": None}

    def loss_fn(model, batch):
        x, y, restart = batch
        state = None if restart else carry["state"]
        logits, state = model(x, state, return_state=True)
        carry["state"] = tuple(s.detach() for s in state) if isinstance(state, tuple) else state.detach()
        return F.cross_entropy(logits.flatten(0, 1), y.flatten())
    return loss_fn


CHAR_LM_RECIPE = {
    "cells": {
        "rnn": {"hidden_size": 249},
        "gru": {"hidden_size": 148, "gate_bias": 1.0},
        "lstm": {"hidden_size": 128, "gate_bias": 1.0},
    },
    "budgets": (300, 1500),
    "lr": 1e-2,
    "seeds": (0, 1, 2),
}
"""Chapter 2's comparison of the three cells (`benchmarks/bench_rnn.py` runs it as the sweep
charlm_equal_params): each cell sized to about 99.7k parameters (embedding 32, one recurrent
layer, read-out), the GRU and the LSTM with the memory gate's bias at 1 (update gate, forget
gate), all trained by `train_char_lm` for the same numbers of steps (the budgets) at one
learning rate, from each seed. A run of the larger budget holds the smaller one: with a
constant learning rate, its first 300 steps are the 300-step run, evaluated there."""


def train_char_lm(cell, corpus, steps, recipe=LMRecipe(), hidden_size=128, embed_size=32,
                  gate_bias=None, seed=0, eval_fn=None, eval_every=0, stateful=False, progress=True):
    """Chapter 2's recipe: a `CharLM` (seeded with `seed`) trained by `train_lm` with `recipe`
    (LMRecipe's defaults: Adam at a constant 0.01, batches of 32 windows of 64, gradients
    clipped to norm 1). gate_bias: the memory gate's initial bias, the LSTM's forget gate
    (`rnn.set_forget_bias`) or the GRU's update gate (`rnn.set_update_bias`); None keeps
    torch's initialisation. Returns (model, history)."""
    if gate_bias is not None and cell not in ("lstm", "gru"):
        raise ValueError(f"gate_bias is for cell='lstm' or 'gru' (a memory gate), got cell={cell!r}")
    seed_everything(seed)
    model = CharLM(len(corpus.vocab), cell, embed_size, hidden_size)
    if gate_bias is not None and cell == "lstm":
        set_forget_bias(model.rnn, gate_bias)  # f = sigmoid(gate_bias + ...) at the start
    elif gate_bias is not None:
        set_update_bias(model.rnn, gate_bias)  # z = sigmoid(gate_bias + ...) at the start
    history = train_lm(model, corpus, steps, recipe, seed=seed, eval_fn=eval_fn, eval_every=eval_every,
                       stateful=stateful, progress=progress, desc=cell.upper())
    return model, history


GPT_RECIPE = LMRecipe(batch_size=12, seq_len=64, lr=1e-3, optimizer="adamw", weight_decay=0.1,
                      betas=(0.9, 0.99), schedule="cosine", warmup=100, min_lr=1e-4, clip=1.0)
"""nanoGPT's CPU recipe ("baby GPT": AdamW, warm-up then cosine decay), for `train_lm`."""


# ---------------------------------------------------------------------------
# Encoder-decoders
# ---------------------------------------------------------------------------

def _one_cycle(model, lr, steps, warmup, betas=(0.9, 0.999)):
    """Adam with a one-cycle schedule: warm up over a fraction `warmup` of the steps, then a
    cosine decay (torch's OneCycleLR)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=betas)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=steps,
                                                    pct_start=warmup)
    return optimizer, scheduler


def train_seq2seq(model, pairs, src_vocab, tgt_vocab, steps, batch_size=64, lr=1e-2, warmup=0.2,
                  seed=0, eval_fn=None, eval_every=0, progress=True, desc=None):
    """Teacher-forced training of a recurrent seq2seq model on (source, target) string pairs:
    `seq2seq.seq2seq_loss`, batches of similar source lengths (`data.length_batches`), Adam
    with a one-cycle schedule, gradients clipped to norm 1."""
    check_int("steps", steps)
    tensors = data.encode_pairs(pairs, src_vocab, tgt_vocab)
    batches = data.length_batches(tensors, batch_size, seed=seed)
    optimizer, scheduler = _one_cycle(model, lr, steps, warmup)
    return fit(model, seq2seq_loss, lambda step: next(batches), steps=steps, optimizer=optimizer,
               scheduler=scheduler, eval_fn=eval_fn, eval_every=eval_every, progress=progress,
               desc=desc)


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
                        f"(e.g. dataclasses.replace(recipes.TRANSFORMER_RECIPE, lr=...))")
    r = recipe
    tensors = data.encode_pairs(pairs, src_vocab, tgt_vocab)
    batches = data.batches({k: v for k, v in tensors.items() if k != "src_len"}, r.batch_size,
                           seed=seed)
    if r.schedule == "one_cycle":
        optimizer, scheduler = _one_cycle(model, r.lr, steps, r.warmup, r.betas)
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


def train_mlm(model, corpus, steps, recipe=GPT_RECIPE, *, rate=0.15, seed=0, eval_fn=None, eval_every=0,
              progress=True, desc="MLM"):
    """Train a MaskedLM BERT's way on random windows of corpus.train: every batch corrupted by
    `mask_tokens` (a new draw each step, a share `rate` of the positions), `mlm_loss`, with
    `recipe` (default GPT_RECIPE: AdamW with weight decay on the weight matrices only, a
    warm-up and a cosine decay to min_lr)."""
    check_int("steps", steps)
    g = torch.Generator().manual_seed(seed)
    optimizer, scheduler = _optimizer(model, recipe, steps)

    def batch(step):
        x, _ = data.lm_batch(corpus.train, recipe.batch_size, recipe.seq_len, g)   # (B, T); no targets
        return mask_tokens(x, model.mask_id, rate, g)
    return fit(model, mlm_loss, batch, steps=steps, optimizer=optimizer, scheduler=scheduler,
               clip=recipe.clip, eval_fn=eval_fn, eval_every=eval_every, progress=progress, desc=desc)
