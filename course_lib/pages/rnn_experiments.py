"""Chapter 2's experiments on trained recurrent language models.

    lstm_trace(model, ids)     every gate, cell and hidden state of a CharLM's LSTM along a text
    gate_saturation(trace)     how often each gate unit is nearly closed or nearly open
    text_features(text)        what a unit may track: position in the line, quotes, brackets
    unit_correlations(s, f)    correlation of every unit with a feature
    unspaced(ids, space_id)    a text without its spaces, and where they were
    Segmenter, train_segmenter, segmentation_scores
                               stacked (bidirectional) GRUs that put the spaces back
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .. import rnn
from ..train import fit, seed_everything

__all__ = ["lstm_trace", "gate_saturation", "text_features", "unit_correlations", "unspaced",
           "Segmenter", "segmentation_scores", "train_segmenter"]


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
