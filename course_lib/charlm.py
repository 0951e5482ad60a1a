"""A character-level language model built on course_lib's recurrent layers, and sampling text.

    e_t      = E[x_t]                      (B, T, embed_size)
    h_t      = recurrent(e_1, ..., e_t)    (B, T, H)    cell: "rnn", "lstm" or "gru"
    logits_t = h_t W_out^T + b_out         (B, T, V)    scores for the next character x_{t+1}

The model reads a prompt, then writes one character at a time through `course_lib.decoding`
(the same step protocol as every other model of the course). Its training recipe is
`train_char_lm` (chapter 2's: `train.train_lm` on a CharLM, CHAR_LM_RECIPE the three cells'
comparison).
"""

from __future__ import annotations

import torch
import torch.nn as nn

from . import decoding
from ._checks import check_choice, check_ids, check_int
from .rnn import GRU, LSTM, RNN, set_forget_bias, set_update_bias
from .train import LMRecipe, seed_everything, train_lm

__all__ = ["CELLS", "CharLM", "generate", "CHAR_LM_RECIPE", "train_char_lm"]

CELLS = {"rnn": RNN, "lstm": LSTM, "gru": GRU}


class CharLM(nn.Module):
    """Next-character model: embedding, recurrent layers, linear read-out.

    forward(x, hx=None, return_state=False): x (B, T) character ids -> logits (B, T, V),
    and the final state too if return_state (to continue reading where x stopped).
    forget_bias (LSTM only): the initial forget-gate bias, see `rnn.set_forget_bias`.
    start(prompt) / step(y, state): the decoding protocol of `course_lib.decoding`.
    """

    def __init__(self, vocab_size, cell="lstm", embed_size=32, hidden_size=128, num_layers=1,
                 forget_bias=None):
        super().__init__()
        check_choice("cell", cell, CELLS)
        check_int("vocab_size", vocab_size)
        self.cell, self.vocab_size = cell, vocab_size
        self.embed = nn.Embedding(vocab_size, embed_size)
        self.rnn = CELLS[cell](embed_size, hidden_size, num_layers)
        self.head = nn.Linear(hidden_size, vocab_size)
        if forget_bias is not None:
            if cell != "lstm":
                raise ValueError(f"forget_bias is for cell='lstm' only, got cell={cell!r}")
            set_forget_bias(self.rnn, forget_bias)

    def forward(self, x, hx=None, return_state=False):
        check_ids("x", x, self.vocab_size)
        h, state = self.rnn(self.embed(x), hx)  # (B, T, H)
        logits = self.head(h)  # (B, T, V)
        return (logits, state) if return_state else logits

    def start(self, prompt):
        """Read all of prompt (N, P) but its last character, which is the first one fed to
        `step`. -> y0 (N,), state (the layers' state, batch first: (N, L, H) or a pair)"""
        check_ids("prompt", prompt, self.vocab_size)
        state = None
        if prompt.shape[1] > 1:
            _, hx = self(prompt[:, :-1], return_state=True)
            state = _swap_batch(hx)
        return prompt[:, -1], state

    def step(self, y, state):
        """One character y (N,) -> logits (N, V) for the next one, and the new state."""
        hx = None if state is None else _swap_batch(state)  # (L, N, H): the layers' layout
        logits, hx = self(y[:, None], hx, return_state=True)  # (N, 1, V)
        return logits[:, -1], _swap_batch(hx)


def _swap_batch(state):
    """(L, N, H) <-> (N, L, H), for a tensor or the LSTM's pair (h, c): decoding wants the
    batch first (to reorder rows), the recurrent layers want it second."""
    if isinstance(state, tuple):
        return tuple(s.transpose(0, 1).contiguous() for s in state)
    return state.transpose(0, 1).contiguous()


@torch.no_grad()
def generate(model, vocab, prompt, length, temperature=1.0, top_k=None, top_p=None,
             num_samples=1, generator=None):
    """Continue `prompt` by `length` sampled characters, `num_samples` times.

    The model reads the prompt once, then feeds each sampled character back in, carrying its
    state (`decoding.sample`). Returns a list of num_samples strings (prompt included).
    """
    if not prompt:
        raise ValueError("prompt must hold at least one character")
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    ids = torch.tensor([vocab.encode(prompt)] * num_samples, device=device)  # (N, P)
    y0, state = model.start(ids)
    texts = [prompt] * num_samples
    if length > 0:
        tokens, _ = decoding.sample(model.step, y0, state, length, temperature, top_k, top_p,
                                    generator=generator)
        texts = [prompt + vocab.decode(row) for row in tokens.tolist()]
    model.train(was_training)
    return texts


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
