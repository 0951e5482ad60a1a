"""Chapter 8's extrapolation experiment: which position scheme still finds the previous token
beyond the longest training sequence?

    previous_token(n, T, generator)      the task: at every position, output the token before it
    PreviousTokenModel(positions)        embeddings (+ a position scheme) -> one causal attention
                                         layer -> an MLP
    POSITION_SCHEMES                     the five schemes the chapter compares, by name
    SETTINGS, build_model(scheme, s)     each scheme's own knob (a base, the slopes) and a model with it
    train_previous_token(name, seed)     one model trained on length 16, tested on length 48
                                         -> held-out accuracy per position (train_scheme: with a setting)
    accuracy_per_position(model, x, y)   held-out accuracy per position, optionally with a key mask
    offset_mask(T, lowest, highest)      the keys a query may see, by offset: lowest <= t - j <= highest
    rope_score_parts(model, x)           a RoPE model's mean score by offset, per rotation pair
    NoPositionModel, where_am_i          no positional code at all: can a causal mask tell positions?

`benchmarks/bench_positional.py` runs the same functions over three seeds (sweeps
positional_extrapolation, positional_tuned, key_window, position_from_mask), so the chapter's
live runs and the committed sweeps are one recipe.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .. import attention as A
from ..multihead import MultiHeadAttention, merge_heads
from ..positional import (LearnedPositionalEmbedding, SinusoidalPositionalEncoding, alibi_bias, apply_rope,
                         sinusoidal_encoding)
from ..train import fit, seed_everything

__all__ = ["VOCAB", "TRAIN_LEN", "TEST_LEN", "D_MODEL", "previous_token", "PreviousTokenModel",
           "POSITION_SCHEMES", "SETTINGS", "build_model", "train_previous_token", "train_scheme",
           "accuracy_per_position", "offset_mask", "rope_score_parts", "NoPositionModel", "where_am_i",
           "train_where_am_i"]

VOCAB, TRAIN_LEN, TEST_LEN, D_MODEL = 10, 16, 48, 32


def previous_token(n, T, generator):
    """n random sequences of T tokens in 0..VOCAB-1 -> (x (n, T), y (n, T)): y[:, t] = x[:, t-1],
    and y[:, 0] = VOCAB ("none")."""
    x = torch.randint(0, VOCAB, (n, T), generator=generator)
    y = torch.cat([torch.full((n, 1), VOCAB), x[:, :-1]], 1)
    return x, y


class PreviousTokenModel(nn.Module):
    """Embeddings (+ positions) -> one causal multi-head attention layer -> MLP over VOCAB + 1 classes.

    positions: a module adding a code to the tokens; or "rope" (rotate queries and keys instead,
    frequencies rope_base^(-2i/d_k)), or "alibi" (add -m_h (i - j) to the scores, slopes m_h:
    `slopes`, default the paper's).
    forward(x, allowed=None, return_weights=False) -> logits (B, T, VOCAB + 1) [, weights (B, h, T, T)];
    allowed: a (T, T) bool mask of the keys each query may see (default: the causal mask); a
    narrower one is an intervention (see `offset_mask`).
    """

    def __init__(self, positions, num_heads=2, slopes=None, rope_base=10000.0):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        self.pos, self.slopes, self.rope_base = positions, slopes, rope_base
        self.attn = MultiHeadAttention(D_MODEL, num_heads)
        self.mlp = nn.Sequential(nn.Linear(D_MODEL, 4 * D_MODEL), nn.ReLU(),
                                 nn.Linear(4 * D_MODEL, VOCAB + 1))

    def forward(self, x, allowed=None, return_weights=False):
        tokens = self.embed(x)                                   # (B, T, D)
        T = x.shape[1]
        causal = A.causal_mask(T) if allowed is None else allowed   # query t sees keys 0..t
        if self.pos in ("rope", "alibi"):                        # positions enter the scores only
            q, k, v = self.attn.project(tokens, tokens, tokens)  # (B, h, T, d_k) each
            if self.pos == "rope":
                q, k = apply_rope(q, base=self.rope_base), apply_rope(k, base=self.rope_base)
                mask = causal
            else:
                mask = alibi_bias(T, self.attn.num_heads, slopes=self.slopes)   # (h, T, T), causal
                if allowed is not None:
                    mask = mask.masked_fill(~allowed, -math.inf)
            heads, weights = A.scaled_dot_product_attention(q, k, v, mask=mask)
            found = self.attn.out_proj(merge_heads(heads))
        else:
            where = self.pos(tokens)                             # token + position
            found, weights = self.attn(where, where, tokens, causal)   # queries/keys: where; values: what
        logits = self.mlp(found)                                 # (B, T, VOCAB + 1)
        return (logits, weights) if return_weights else logits


STEEP = (1 / 2, 1 / 4)   # the two steepest of ALiBi's slopes for 8 heads

POSITION_SCHEMES = {
    "sinusoidal": lambda: PreviousTokenModel(SinusoidalPositionalEncoding(D_MODEL, max_len=TEST_LEN)),
    "learned": lambda: PreviousTokenModel(LearnedPositionalEmbedding(D_MODEL, TEST_LEN)),
    "RoPE": lambda: PreviousTokenModel("rope"),
    "ALiBi": lambda: PreviousTokenModel("alibi"),                  # 2 heads: slopes 1/16, 1/256
    "ALiBi_steep": lambda: PreviousTokenModel("alibi", slopes=torch.tensor(STEEP)),
}


def _loss(model, batch):
    x, y = batch
    return F.cross_entropy(model(x).flatten(0, 1), y.flatten())


# Each scheme's own knob, three values (learned embeddings have none): the grid of the sweep
# positional_tuned, declared before it ran, so that no scheme is tuned after the fact.
SETTINGS = {
    "sinusoidal": [100.0, 10000.0, 1000000.0],                      # base (paper: 10000)
    "learned": [None],
    "RoPE": [100.0, 10000.0, 1000000.0],                            # base (paper: 10000)
    "ALiBi": [[1 / 16, 1 / 256], [1 / 4, 1 / 16], [1 / 2, 1 / 4]],  # slopes (paper, 2 heads: 1/16, 1/256)
}


def build_model(scheme, setting):
    """A PreviousTokenModel with scheme `scheme` ("sinusoidal", "learned", "RoPE", "ALiBi") and
    its knob set to `setting` (one of SETTINGS[scheme]); consumes the random generator exactly as
    the matching POSITION_SCHEMES entry does."""
    if scheme not in SETTINGS:
        raise ValueError(f"scheme must be one of {sorted(SETTINGS)}, got {scheme!r}")
    if scheme == "sinusoidal":
        positions = SinusoidalPositionalEncoding(D_MODEL, max_len=TEST_LEN)
        positions.pe.copy_(sinusoidal_encoding(TEST_LEN, D_MODEL, base=setting))   # (TEST_LEN, D)
        return PreviousTokenModel(positions)
    if scheme == "learned":
        return PreviousTokenModel(LearnedPositionalEmbedding(D_MODEL, TEST_LEN))
    if scheme == "RoPE":
        return PreviousTokenModel("rope", rope_base=setting)
    return PreviousTokenModel("alibi", slopes=torch.tensor(setting, dtype=torch.float32))


def accuracy_per_position(model, x, y, allowed=None):
    """Accuracy of `model` on (x, y) at each position, (T,), in eval mode without gradients;
    allowed: the (T, T) bool mask of the keys each query may see (default: causal)."""
    model.eval()
    with torch.no_grad():
        return (model(x, allowed).argmax(-1) == y).float().mean(0)


def _train(make_model, seed, steps, lr, progress, desc):
    """make_model() seeded with `seed`, trained by `fit` (Adam) on batches of 64 sequences of
    TRAIN_LEN tokens, tested on 500 held-out sequences of TEST_LEN.
    -> (model in eval mode, accuracy per position (TEST_LEN,))."""
    x_test, y_test = previous_token(500, TEST_LEN, torch.Generator().manual_seed(1234))
    seed_everything(seed)
    model = make_model()
    g = torch.Generator().manual_seed(100 + seed)
    fit(model, _loss, lambda step: previous_token(64, TRAIN_LEN, g), steps=steps, lr=lr,
        progress=progress, desc=desc)
    return model, accuracy_per_position(model, x_test, y_test)


def train_previous_token(name, seed, steps=400, lr=3e-3, progress=True):
    """The model of scheme `name` (POSITION_SCHEMES), seeded with `seed`, trained on length
    TRAIN_LEN, tested on length TEST_LEN. -> (model in eval mode, accuracy per position (TEST_LEN,))."""
    if name not in POSITION_SCHEMES:
        raise ValueError(f"name must be one of {sorted(POSITION_SCHEMES)}, got {name!r}")
    return _train(POSITION_SCHEMES[name], seed, steps, lr, progress, desc=f"{name}, seed {seed}")


def train_scheme(scheme, setting, seed, steps=400, lr=3e-3, progress=True):
    """As train_previous_token, for `build_model(scheme, setting)`."""
    return _train(lambda: build_model(scheme, setting), seed, steps, lr, progress,
                  desc=f"{scheme} {setting}, seed {seed}")


def offset_mask(T, lowest=0, highest=None):
    """(T, T) bool: query t may see key j when lowest <= t - j <= highest (default: every key
    up to t, the causal mask). offset_mask(T, 0, TRAIN_LEN - 1): only the offsets seen in training."""
    offset = torch.arange(T)[:, None] - torch.arange(T)[None, :]      # (T, T): t - j
    allowed = offset >= lowest
    return allowed if highest is None else allowed & (offset <= highest)


def rope_score_parts(model, x):
    """The mean attention score of a RoPE model by offset, split into its rotation pairs.

    score(t, j) = (R_t q_t) . (R_j k_j) / sqrt(d_k) = sum over pairs i of one term each.
    Returns (h, T, d_k/2): [head, o, i] = pair i's term at offset o = t - j, averaged over the
    sequences of x and over the queries t >= o.
    """
    model.eval()
    with torch.no_grad():
        tokens = model.embed(x)
        q, k, _ = model.attn.project(tokens, tokens, tokens)            # (B, h, T, d_k) each
        q, k = apply_rope(q, base=model.rope_base), apply_rope(k, base=model.rope_base)
        B, h, T, d_k = q.shape
        parts = torch.zeros(h, T, d_k // 2)
        for o in range(T):
            t = torch.arange(o, T)
            term = q[:, :, t] * k[:, :, t - o] / math.sqrt(d_k)         # (B, h, T - o, d_k)
            parts[:, o] = term.view(B, h, T - o, d_k // 2, 2).sum(-1).mean((0, 2))
    return parts


# ---------------------------------------------------------------------------------------
# No positional code at all: can a causal mask alone tell the positions apart?
# ---------------------------------------------------------------------------------------

class NoPositionModel(nn.Module):
    """Embeddings (no positional code) -> one attention layer, causal or not -> MLP over the
    TRAIN_LEN positions. x (B, T) tokens 0..VOCAB (VOCAB = <bos>) -> logits (B, T, TRAIN_LEN)."""

    def __init__(self, causal):
        super().__init__()
        self.causal = causal
        self.embed = nn.Embedding(VOCAB + 1, D_MODEL)
        self.attn = MultiHeadAttention(D_MODEL, num_heads=2)
        self.mlp = nn.Sequential(nn.Linear(D_MODEL, 4 * D_MODEL), nn.ReLU(),
                                 nn.Linear(4 * D_MODEL, TRAIN_LEN))

    def forward(self, x):
        tokens = self.embed(x)                                   # (B, T, D): what, not where
        mask = A.causal_mask(x.shape[1]) if self.causal else None
        found, _ = self.attn(tokens, tokens, tokens, mask)
        return self.mlp(found)                                   # (B, T, TRAIN_LEN)


def where_am_i(n, generator):
    """n sequences of <bos> + TRAIN_LEN - 1 random tokens -> (x (n, T), y (n, T)): y[:, t] = t."""
    x = torch.randint(0, VOCAB, (n, TRAIN_LEN), generator=generator)
    x[:, 0] = VOCAB                                              # <bos> first
    return x, torch.arange(TRAIN_LEN).expand(n, TRAIN_LEN)


def _position_loss(model, batch):
    x, y = batch
    return F.cross_entropy(model(x).flatten(0, 1), y.flatten())


def train_where_am_i(causal, seed, steps=400, lr=3e-3, progress=True):
    """NoPositionModel(causal) seeded with `seed`, trained (Adam) on batches of 64 sequences,
    tested on 1000 held-out ones. -> (model in eval mode, held-out accuracy of the position)."""
    x_test, y_test = where_am_i(1000, torch.Generator().manual_seed(1234))
    seed_everything(seed)
    model = NoPositionModel(causal)
    g = torch.Generator().manual_seed(100 + seed)
    fit(model, _position_loss, lambda step: where_am_i(64, g), steps=steps, lr=lr, progress=progress,
        desc=f"{'causal mask' if causal else 'no mask'}, seed {seed}")
    model.eval()
    with torch.no_grad():
        return model, (model(x_test).argmax(-1) == y_test).float().mean().item()
