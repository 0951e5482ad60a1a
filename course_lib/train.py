"""A small training loop shared by the chapters, the held-out metrics they report, and the
language models' recipe.

    seed_everything(0)
    history = fit(model, loss_fn, batches, steps=2000, lr=3e-3)
    history.train_loss[-1], history.evals[-1]

``fit`` is deliberately plain: sample a batch, compute the loss, backpropagate, clip the
gradient norm, take an Adam step; every ``eval_every`` steps call ``eval_fn(model)`` in
eval mode. A tqdm progress bar shows the running loss (in Jupyter, Colab and the terminal).

    train_lm(model, corpus, steps, recipe)   next-character (or next-token) language models: the
                                             RNNs of chapter 2, the GPT of chapter 10, with an
                                             LMRecipe (GPT_RECIPE: nanoGPT's), on random windows
                                             or, stateful, on consecutive windows of streams
    warmup_cosine, one_cycle                 the learning-rate schedules the recipes use

Each family's trainer sits beside its model: `charlm.train_char_lm`, `mlm.train_mlm`,
`seq2seq_train.train_seq2seq`, `transformer_train.train_transformer`. Seed the model's
initialisation yourself (`seed_everything(seed)` before building it); `seed` there seeds the
order of the batches.
"""

from __future__ import annotations

import math
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Callable, Iterable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from . import data
from ._checks import check_choice, check_int


def seed_everything(seed: int = 0) -> None:
    """Seed Python's, numpy's and torch's random number generators."""
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002 (seeds the global generator that numpy code uses)
    torch.manual_seed(seed)


def default_device() -> torch.device:
    """CUDA if a GPU is present (e.g. on Colab), else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def to_device(batch: Any, device: str | torch.device) -> Any:
    """Move a tensor, or the tensors inside a tuple/list/dict, to `device`."""
    if torch.is_tensor(batch):
        return batch.to(device)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(to_device(v, device) for v in batch)
    return batch


@dataclass
class History:
    """What ``fit`` measured: the training loss per step, evaluations, wall time."""
    steps: list[int] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    evals: list[tuple[int, Any]] = field(default_factory=list)   # (step, eval_fn(model))
    seconds: float = 0.0


def fit(model: nn.Module, loss_fn: Callable[[nn.Module, Any], torch.Tensor],
        batches: Callable[[int], Any] | Iterable, *, steps: int, lr: float = 1e-3,
        optimizer: torch.optim.Optimizer | None = None, clip: float | None = 1.0,
        eval_fn: Callable[[nn.Module], Any] | None = None, eval_every: int = 0,
        device: str | torch.device | None = None, progress: bool = True,
        desc: str | None = None, scheduler: Any | None = None) -> History:
    """Train `model` for `steps` steps and return its :class:`History`.

    loss_fn(model, batch) -> scalar loss
    batches: a callable step -> batch, or an iterable of batches (cycled if it ends)
    clip: clip the global gradient norm to this value (None: no clipping)
    eval_fn(model) -> anything (e.g. a dict of held-out metrics); called in eval mode
        under torch.no_grad() every `eval_every` steps and after the last step.
    """
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    device = torch.device(device) if device is not None else next(model.parameters()).device
    model.to(device)
    optimizer = optimizer or torch.optim.Adam(model.parameters(), lr=lr)
    next_batch = batches if callable(batches) else _cycle(batches)
    history = History()
    start = time.perf_counter()
    bar = tqdm(range(1, steps + 1), desc=desc, disable=not progress, mininterval=1.0)
    for step in bar:
        model.train()
        loss = loss_fn(model, to_device(next_batch(step), device))
        if not torch.isfinite(loss):
            raise FloatingPointError(f"the loss is {loss.item()} at step {step}; lower lr or clip")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        history.steps.append(step)
        history.train_loss.append(loss.item())
        if step % 50 == 0 or step == steps:
            bar.set_postfix(loss=f"{_recent_mean(history.train_loss):.3f}")
        if eval_fn is not None and ((eval_every and step % eval_every == 0) or step == steps):
            history.evals.append((step, evaluate(model, eval_fn)))
    bar.close()
    history.seconds = time.perf_counter() - start
    return history


def evaluate(model: nn.Module, eval_fn: Callable[[nn.Module], Any]) -> Any:
    """eval_fn(model) in eval mode, without gradients; the model's mode is restored."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            return eval_fn(model)
    finally:
        model.train(was_training)


def _cycle(iterable):
    def next_batch(step, it=[iter(iterable)]):  # noqa: B006, B008 (one iterator, kept between calls)
        try:
            return next(it[0])
        except StopIteration:
            it[0] = iter(iterable)
            return next(it[0])
    return next_batch


def _recent_mean(values, n=50):
    return sum(values[-n:]) / len(values[-n:])


# ---------------------------------------------------------------------------
# Held-out metrics
# ---------------------------------------------------------------------------

def exact_match(predictions: list[str], targets: list[str]) -> float:
    """Fraction of predicted sequences equal to their target, character for character."""
    if len(predictions) != len(targets):
        raise ValueError(f"{len(predictions)} predictions for {len(targets)} targets")
    return sum(p == t for p, t in zip(predictions, targets)) / max(len(targets), 1)


def position_accuracy(predictions: list[str], targets: list[str]) -> float:
    """Fraction of target positions predicted right (a missing position counts as wrong)."""
    if len(predictions) != len(targets):
        raise ValueError(f"{len(predictions)} predictions for {len(targets)} targets")
    right = sum(sum(a == b for a, b in zip(p, t)) for p, t in zip(predictions, targets))
    return right / max(sum(len(t) for t in targets), 1)


@torch.no_grad()
def lm_heldout_loss(model: nn.Module, ids: torch.Tensor, seq_len: int = 256,
                    batch_size: int = 32) -> float:
    """Mean cross-entropy in nats per character of a language model on held-out ids.

    The text is cut into non-overlapping windows of `seq_len` + 1 characters; each window is
    read from a fresh (zero) state: model(x) -> logits (B, seq_len, V) predicting x shifted
    by one. Bits per character = nats / ln 2; perplexity = exp(nats).
    """
    if ids.dim() != 1 or len(ids) <= seq_len:
        raise ValueError(f"ids must be 1-D and longer than seq_len={seq_len}, got shape {tuple(ids.shape)}")
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    n_windows = (len(ids) - 1) // seq_len
    windows = ids[:n_windows * seq_len + 1]
    x_all = windows[:-1].view(n_windows, seq_len)       # (W, T)
    y_all = windows[1:].view(n_windows, seq_len)        # (W, T)
    total, count = 0.0, 0
    for i in range(0, n_windows, batch_size):
        x, y = x_all[i:i + batch_size].to(device), y_all[i:i + batch_size].to(device)
        logits = model(x)                                # (B, T, V)
        total += nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="sum").item()
        count += y.numel()
    model.train(was_training)
    return total / count


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters (a tied matrix counts once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def bits_per_char(nats: float) -> float:
    """Nats per character -> bits per character."""
    return nats / math.log(2)


def set_threads(n: int) -> int:
    """Run torch on ``n`` CPU threads, or fewer if the environment variable
    ``COURSE_LIB_THREADS`` says so; returns the number used.

    The cap is for machines that run several notebooks at once: `make test` runs two side by
    side on two cores and sets it to 1, since two threads each would fight over the cores.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int (threads), got {n!r}")
    cap = os.environ.get("COURSE_LIB_THREADS", "")
    if cap:
        if not cap.isdigit() or int(cap) < 1:
            raise ValueError(f"COURSE_LIB_THREADS must be a positive integer, got {cap!r}")
        n = min(n, int(cap))
    torch.set_num_threads(n)
    return n


# ---------------------------------------------------------------------------
# Language models: the recipe of chapters 2 and 10
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


def one_cycle(model, lr, steps, warmup, betas=(0.9, 0.999)):
    """Adam with a one-cycle schedule: warm up over a fraction `warmup` of the steps, then a
    cosine decay (torch's OneCycleLR)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=betas)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=steps,
                                                    pct_start=warmup)
    return optimizer, scheduler


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


def lm_optimizer(model, recipe, steps):
    """The optimiser and learning-rate scheduler (None when constant) of an LMRecipe."""
    if not isinstance(recipe, LMRecipe):
        raise TypeError(f"recipe must be an LMRecipe, got {type(recipe).__name__} "
                        f"(e.g. dataclasses.replace(train.GPT_RECIPE, lr=...))")
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
    (`lm_heldout_loss`).
    """
    check_int("steps", steps)
    r = recipe
    g = torch.Generator().manual_seed(seed)
    opt, scheduler = lm_optimizer(model, r, steps)
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


GPT_RECIPE = LMRecipe(batch_size=12, seq_len=64, lr=1e-3, optimizer="adamw", weight_decay=0.1,
                      betas=(0.9, 0.99), schedule="cosine", warmup=100, min_lr=1e-4, clip=1.0)
"""nanoGPT's recipe for its quick CPU run (AdamW, warm-up then cosine decay), for `train_lm`."""
