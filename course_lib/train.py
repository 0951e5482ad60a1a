"""A small training loop shared by the chapters, and the held-out metrics they report.

    seed_everything(0)
    history = fit(model, loss_fn, batches, steps=2000, lr=3e-3)
    history.train_loss[-1], history.evals[-1]

``fit`` is deliberately plain: sample a batch, compute the loss, backpropagate, clip the
gradient norm, take an Adam step; every ``eval_every`` steps call ``eval_fn(model)`` in
eval mode. A tqdm progress bar shows the running loss (in Jupyter, Colab and the terminal).
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
from torch import nn
from tqdm.auto import tqdm


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
