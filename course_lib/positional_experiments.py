"""Chapter 8's extrapolation experiment: which position scheme still finds the previous token
beyond the longest training sequence?

    previous_token(n, T, generator)      the task: at every position, output the token before it
    PreviousTokenModel(positions)        embeddings (+ a position scheme) -> one causal attention
                                         layer -> an MLP
    POSITION_SCHEMES                     the five schemes the chapter compares, by name
    train_previous_token(name, seed)     one model trained on length 16, tested on length 48
                                         -> held-out accuracy per position

`benchmarks/bench_positional.py` runs the same function over three seeds (sweep
positional_extrapolation), so the chapter's live run and the committed sweep are one recipe.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from . import attention as A
from .multihead import MultiHeadAttention, merge_heads
from .positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding, alibi_bias, apply_rope
from .train import fit, seed_everything

__all__ = ["VOCAB", "TRAIN_LEN", "TEST_LEN", "D_MODEL", "previous_token", "PreviousTokenModel",
           "POSITION_SCHEMES", "train_previous_token"]

VOCAB, TRAIN_LEN, TEST_LEN, D_MODEL = 10, 16, 48, 32


def previous_token(n, T, generator):
    """n random sequences of T tokens in 0..VOCAB-1 -> (x (n, T), y (n, T)): y[:, t] = x[:, t-1],
    and y[:, 0] = VOCAB ("none")."""
    x = torch.randint(0, VOCAB, (n, T), generator=generator)
    y = torch.cat([torch.full((n, 1), VOCAB), x[:, :-1]], 1)
    return x, y


class PreviousTokenModel(nn.Module):
    """Embeddings (+ positions) -> one causal multi-head attention layer -> MLP over VOCAB + 1 classes.

    positions: a module adding a code to the tokens; or "rope" (rotate queries and keys instead),
    or "alibi" (add -m_h (i - j) to the scores, slopes m_h: `slopes`, default the paper's).
    """

    def __init__(self, positions, num_heads=2, slopes=None):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        self.pos, self.slopes = positions, slopes
        self.attn = MultiHeadAttention(D_MODEL, num_heads)
        self.mlp = nn.Sequential(nn.Linear(D_MODEL, 4 * D_MODEL), nn.ReLU(),
                                 nn.Linear(4 * D_MODEL, VOCAB + 1))

    def forward(self, x):
        tokens = self.embed(x)                                   # (B, T, D)
        T = x.shape[1]
        causal = A.causal_mask(T)                                # query t sees keys 0..t
        if self.pos in ("rope", "alibi"):                        # positions enter the scores only
            q, k, v = self.attn.project(tokens, tokens, tokens)  # (B, h, T, d_k) each
            if self.pos == "rope":
                q, k, mask = apply_rope(q), apply_rope(k), causal
            else:
                mask = alibi_bias(T, self.attn.num_heads, slopes=self.slopes)   # (h, T, T), causal
            heads, _ = A.scaled_dot_product_attention(q, k, v, mask=mask)
            found = self.attn.out_proj(merge_heads(heads))
        else:
            where = self.pos(tokens)                             # token + position
            found, _ = self.attn(where, where, tokens, causal)   # queries/keys: where; values: what
        return self.mlp(found)                                   # (B, T, VOCAB + 1)


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


def train_previous_token(name, seed, steps=400, lr=3e-3, progress=True):
    """The model of scheme `name` (POSITION_SCHEMES), seeded with `seed`, trained by `fit` (Adam)
    on batches of 64 sequences of TRAIN_LEN tokens, tested on 500 held-out sequences of
    TEST_LEN. -> (model in eval mode, accuracy per position (TEST_LEN,))."""
    if name not in POSITION_SCHEMES:
        raise ValueError(f"name must be one of {sorted(POSITION_SCHEMES)}, got {name!r}")
    x_test, y_test = previous_token(500, TEST_LEN, torch.Generator().manual_seed(1234))
    seed_everything(seed)
    model = POSITION_SCHEMES[name]()
    g = torch.Generator().manual_seed(100 + seed)
    fit(model, _loss, lambda step: previous_token(64, TRAIN_LEN, g), steps=steps, lr=lr,
        progress=progress, desc=f"{name}, seed {seed}")
    model.eval()
    with torch.no_grad():
        return model, (model(x_test).argmax(-1) == y_test).float().mean(0)
