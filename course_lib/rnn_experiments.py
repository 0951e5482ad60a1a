"""Chapter 2's experiments on trained recurrent language models.

    load_sweep(name)           a committed sweep, course_lib/sweeps/<name>.json
    summarise_charlm(sweep)    per cell and budget: the best learning rate and its per-seed losses
    summarise_adding(sweep)    per configuration of an adding-problem sweep: the same
    lstm_trace(model, ids)     every gate, cell and hidden state of a CharLM's LSTM along a text
    gate_saturation(trace)     how often each gate unit is nearly closed or nearly open
    text_features(text)        what a unit may track: position in the line, quotes, brackets
    unit_correlations(s, f)    correlation of every unit with a feature
    unspaced(ids, space_id)    a text without its spaces, and where they were
    Segmenter, train_segmenter, segmentation_scores
                               stacked (bidirectional) GRUs that put the spaces back
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from . import rnn
from .train import fit, seed_everything

SWEEPS_DIR = Path(__file__).resolve().parent / "sweeps"

__all__ = ["SWEEPS_DIR", "load_sweep", "summarise_charlm", "summarise_adding", "lstm_trace",
           "gate_saturation",
           "text_features", "unit_correlations", "unspaced", "Segmenter", "segmentation_scores",
           "train_segmenter"]


def load_sweep(name):
    """The committed sweep `name` (written by benchmarks/sweeps_rnn.py) as a dict:
    "config", "fingerprint", "seconds" and "runs", one dict per (configuration, seed)."""
    path = SWEEPS_DIR / f"{name}.json"
    if not path.exists():
        raise FileNotFoundError(f"no committed sweep {name!r} at {path}; run "
                                f"`python benchmarks/sweeps_rnn.py {name}`")
    return json.loads(path.read_text())


def summarise_charlm(sweep):
    """{(cell, budget): row} for the charlm_cells sweep. For each cell and budget (a number of
    steps), the learning rate is the one with the lowest validation loss averaged over seeds;
    row = {"lr", "val": [nats per seed], "test": [nats per seed], "by_lr": {lr: mean val}}."""
    table = {}
    for cell in sweep["config"]["cells"]:
        for budget in sweep["config"]["budgets"]:
            by_lr = {}
            for run in sweep["runs"]:
                if run["cell"] != cell:
                    continue
                at = {step: (val, test) for step, val, test in run["evals"]}
                if budget in at:
                    by_lr.setdefault(run["lr"], []).append((run["seed"], *at[budget]))
            if not by_lr:
                continue
            means = {lr: sum(v for _, v, _ in rows) / len(rows) for lr, rows in by_lr.items()}
            best = min(means, key=means.get)
            rows = sorted(by_lr[best])
            table[cell, budget] = {"lr": best, "seeds": [s for s, _, _ in rows],
                                   "val": [v for _, v, _ in rows], "test": [t for _, _, t in rows],
                                   "by_lr": means}
    return table


def summarise_adding(sweep, keys=("cell", "T", "init", "truncate")):
    """{configuration: row} for an adding-problem sweep (benchmarks/sweeps_rnn.py), one row per
    value of `keys`. The learning rate is the one with the lowest final validation MSE averaged
    over seeds; row = {"lr", "seeds", "test": [test MSE per seed], "curves": [[(step, val MSE)]
    per seed], "remembered": [per seed], "gain": [per seed], "by_lr": {lr: mean final val}}."""
    groups = {}
    for run in sweep["runs"]:
        key = tuple(run.get(k) for k in keys)
        groups.setdefault(key, {}).setdefault(run["lr"], []).append(run)
    table = {}
    for key, by_lr in groups.items():
        means = {lr: sum(r["evals"][-1][1] for r in runs) / len(runs) for lr, runs in by_lr.items()}
        best = min(means, key=means.get)
        runs = sorted(by_lr[best], key=lambda r: r["seed"])
        table[key] = {"lr": best, "seeds": [r["seed"] for r in runs],
                      "test": [r["test_mse"] for r in runs],
                      "curves": [[tuple(e) for e in r["evals"]] for r in runs],
                      "remembered": [r["remembered"] for r in runs],
                      "gain": [r["gain"] for r in runs], "by_lr": means}
    return table


# ---------------------------------------------------------------------------
# Inside a trained LSTM: gates and units
# ---------------------------------------------------------------------------

@torch.no_grad()
def lstm_trace(model, ids):
    """Read the rows of `ids` (B, T) through a CharLM whose first layer is an LSTM, each from a
    zero state, and record what the cell computes at every step (as `rnn.lstm_step`):

        {"i", "f", "g", "o", "c", "h"}: each (B, T, H); [b, t] after reading ids[b, t]
    """
    layer = model.rnn
    if not isinstance(layer, rnn.LSTM):
        raise ValueError(f"lstm_trace needs a CharLM with an LSTM, got {type(layer).__name__}")
    x_proj = F.linear(model.embed(ids), layer.weight_ih_l0, layer.bias_ih_l0)  # (B, T, 4H)
    h = c = x_proj.new_zeros(ids.shape[0], layer.hidden_size)  # (B, H)
    out = {k: [] for k in "ifgoch"}
    for t in range(ids.shape[1]):
        gates = x_proj[:, t] + F.linear(h, layer.weight_hh_l0, layer.bias_hh_l0)  # (B, 4H)
        i, f, g, o = gates.chunk(4, dim=-1)
        i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
        c = f * c + i * g
        h = o * torch.tanh(c)
        for k, v in zip("ifgoch", (i, f, g, o, c, h)):
            out[k].append(v)
    return {k: torch.stack(v, dim=1) for k, v in out.items()}  # (B, T, H) each


def gate_saturation(trace, low=0.1, high=0.9):
    """Per unit, the fraction of steps its gates are left-saturated (< low) and right-saturated
    (> high), as in Karpathy, Johnson & Fei-Fei (2015), Fig. 3:
    {gate: (left (H,), right (H,))} for the gates "i", "f", "o"."""
    return {k: ((trace[k] < low).flatten(0, -2).float().mean(0),
                (trace[k] > high).flatten(0, -2).float().mean(0)) for k in ("i", "f", "o")}


def text_features(text):
    """Features of every character of `text` that a unit may track, as (N,) float tensors:

        "column"        position in the line (0 at the first character of a line)
        "in_quotes"     1 inside a pair of double quotes ("..." or “...”) on the current line
        "in_brackets"   1 inside an open parenthesis or bracket: ( [ {
    The value at t describes the text read so far, up to and including character t.
    """
    column, quotes, brackets = [], [], []
    col, inside, depth = 0, False, 0
    for ch in text:
        if ch == "\n":
            col, inside = 0, False
        else:
            col += 1
        if ch in '"“”':
            inside = (not inside) if ch == '"' else (ch == "“")
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(depth - 1, 0)
        column.append(col)
        quotes.append(float(inside))
        brackets.append(float(depth > 0))
    as_tensor = lambda v: torch.tensor(v, dtype=torch.float32)  # noqa: E731
    return {"column": as_tensor(column), "in_quotes": as_tensor(quotes),
            "in_brackets": as_tensor(brackets)}


def unit_correlations(states, feature):
    """Pearson correlation of every unit's activation with a feature: states (..., H), feature
    (...) -> (H,)."""
    states, feature = states.flatten(0, -2), feature.flatten()  # (N, H), (N,)
    s = states - states.mean(0)
    f = feature - feature.mean()
    return (s * f[:, None]).sum(0) / (s.norm(dim=0) * f.norm()).clamp_min(1e-12)


# ---------------------------------------------------------------------------
# Stacked and bidirectional layers at work: where do the spaces go?
# ---------------------------------------------------------------------------

def unspaced(ids, space_id):
    """Remove the spaces from a text and remember where they were (word segmentation):

    ids (N,) -> x (M,) the ids without spaces, y (M,) float: 1 where a space followed x[m]
    """
    is_space = ids == space_id  # (N,)
    keep = ~is_space
    followed = torch.zeros_like(is_space)
    followed[:-1] = is_space[1:]  # a space comes next
    return ids[keep], followed[keep].float()


class Segmenter(nn.Module):
    """Embedding, stacked (optionally bidirectional) GRU layers, one logit per character:
    "does a space follow this character?". x (B, T) -> logits (B, T)."""

    def __init__(self, vocab_size, hidden_size=32, num_layers=2, bidirectional=True,
                 embed_size=16):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_size)
        self.rnn = rnn.GRU(embed_size, hidden_size, num_layers, bidirectional=bidirectional)
        self.head = nn.Linear(hidden_size * (2 if bidirectional else 1), 1)

    def forward(self, x):
        h, _ = self.rnn(self.embed(x))  # (B, T, D*H): both directions side by side
        return self.head(h).squeeze(-1)  # (B, T)


@torch.no_grad()
def segmentation_scores(model, x, y, seq_len=256):
    """Held-out scores of a Segmenter on x, y (M,), read in windows of seq_len characters:
    {"bits": binary cross-entropy in bits per character, "error": share of wrong decisions}."""
    was_training = model.training
    model.eval()
    n = len(x) // seq_len * seq_len
    logits = model(x[:n].view(-1, seq_len)).flatten()  # (n,)
    model.train(was_training)
    bits = F.binary_cross_entropy_with_logits(logits, y[:n]).item() / math.log(2)
    return {"bits": bits, "error": ((logits > 0).float() != y[:n]).float().mean().item()}


def train_segmenter(corpus, steps, bidirectional=True, hidden_size=32, lr=1e-2, seed=0,
                    batch_size=32, seq_len=32, eval_every=0):
    """Train a Segmenter on random windows of corpus.train with the spaces removed (Adam,
    gradients clipped to norm 1); history.evals holds segmentation_scores on corpus.val.
    -> model, history"""
    space = corpus.vocab.stoi[" "]
    x_train, y_train = unspaced(corpus.train, space)
    x_val, y_val = unspaced(corpus.val, space)
    seed_everything(seed)
    model = Segmenter(len(corpus.vocab), hidden_size, bidirectional=bidirectional)
    g = torch.Generator().manual_seed(seed)

    def batch(step):
        start = torch.randint(0, len(x_train) - seq_len, (batch_size, 1), generator=g)
        idx = start + torch.arange(seq_len)  # (B, T)
        return x_train[idx], y_train[idx]

    def loss_fn(m, b):
        return F.binary_cross_entropy_with_logits(m(b[0]), b[1])

    history = fit(model, loss_fn, batch, steps=steps, lr=lr,
                  eval_fn=lambda m: segmentation_scores(m, x_val, y_val),
                  eval_every=eval_every, progress=False)
    return model, history
