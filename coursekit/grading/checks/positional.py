"""References of the checks of chapter 8, "Positional encodings"."""

from __future__ import annotations

import math

import torch

from ..references import Case, Reference, lib, randn, register


# --------------------------------------------------------------------------------------
# The sinusoidal table
# --------------------------------------------------------------------------------------
def _table(n, d, exponent=lambda i, d: 2 * i / d, layout="interleaved"):
    """The sinusoidal table; `exponent` and `layout` name the typical mistakes."""
    pos = torch.arange(n, dtype=torch.float32)[:, None]
    i = torch.arange(d // 2, dtype=torch.float32)
    angle = pos / 10000 ** exponent(i, d)  # (n, d/2)
    if layout == "blocks":
        return torch.cat([torch.sin(angle), torch.cos(angle)], 1)
    pe = torch.zeros(n, d)
    first, second = (torch.cos, torch.sin) if layout == "swapped" else (torch.sin, torch.cos)
    pe[:, 0::2], pe[:, 1::2] = first(angle), second(angle)
    return pe


register(
    "check_sinusoidal_encoding",
    Reference(
        cases=lambda g: [
            Case(f"max_len = {n}, d_model = {d}", n, d) for n, d in [(10, 4), (50, 16), (1, 8), (100, 64)]
        ],
        hidden=lambda g: [Case(f"max_len = {n}, d_model = {d}", n, d) for n, d in [(7, 6), (30, 32)]],
        solution=lib("positional.sinusoidal_encoding"),
        written=_table,
        mistakes=[
            lambda n, d: _table(n, d, layout="swapped"),
            lambda n, d: _table(n, d, layout="blocks"),
            lambda n, d: _table(n, d, exponent=lambda i, d: i / d),
        ],
        shortcuts=[lib("positional.sinusoidal_encoding")],
    ),
)


# --------------------------------------------------------------------------------------
# A shift of position is a rotation
# --------------------------------------------------------------------------------------
def _rotation(angle):
    c, s = math.cos(angle), math.sin(angle)
    return torch.tensor([[c, s], [-s, c]])


register(
    "check_shift_matrix",
    Reference(
        cases=lambda g: [
            Case(f"k = {k}, w = {w}", k, w) for k, w in [(1, 1.0), (3, 0.1), (0, 0.5), (-2, 0.01), (7, 1e-4)]
        ],
        hidden=lambda g: [Case(f"k = {k}, w = {w}", k, w) for k, w in [(2, 0.3), (-5, 0.05)]],
        solution=lambda k, w: _rotation(w * k),
        mistakes=[
            lambda k, w: _rotation(w * k).T,
            lambda k, w: _rotation(w),
        ],
        shortcuts=[],
    ),
)


# --------------------------------------------------------------------------------------
# ALiBi: a relative position bias added to the scores
# --------------------------------------------------------------------------------------
def _alibi(T, slope, sign=-1.0, causal=True):
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    bias = sign * slope * (i - j).float()
    return bias.masked_fill(j > i, -math.inf) if causal else bias


register(
    "check_alibi_bias",
    Reference(
        cases=lambda g: [
            Case(f"T = {T}, slope = {m}", T, m) for T, m in [(4, 0.5), (1, 1.0), (6, 0.25), (8, 2.0)]
        ],
        hidden=lambda g: [Case(f"T = {T}, slope = {m}", T, m) for T, m in [(5, 0.125), (3, 0.7)]],
        solution=_alibi,
        mistakes=[
            lambda T, m: _alibi(T, m, causal=False),
            lambda T, m: _alibi(T, m, sign=1.0),
            lambda T, m: torch.ones(T, T, dtype=torch.bool).tril(),
        ],
        shortcuts=[lambda T, slope: lib("positional.alibi_bias")(T, 1, slopes=torch.tensor([slope]))[0]],
    ),
)


# --------------------------------------------------------------------------------------
# RoPE: rotate the queries and keys by their positions
# --------------------------------------------------------------------------------------
def _rope(x, base=10000.0, exponent="2i/d", sign=1.0, layout="interleaved"):
    """Rotary embedding of x (..., T, d) at positions 0..T-1; the keywords are the mistakes."""
    T, d = x.shape[-2], x.shape[-1]
    i = torch.arange(d // 2, dtype=torch.float64)
    frequency = base ** (-(2 * i if exponent == "2i/d" else i) / d)
    theta = torch.arange(T, dtype=torch.float64)[:, None] * frequency  # (T, d/2)
    cos, sin = torch.cos(theta).to(x.dtype), sign * torch.sin(theta).to(x.dtype)
    if layout == "halves":
        a, b = x[..., : d // 2], x[..., d // 2 :]
        return torch.cat([a * cos - b * sin, a * sin + b * cos], -1)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], -1).flatten(-2)


register(
    "check_apply_rope",
    Reference(
        seed=41,
        cases=lambda g: [
            Case("T = 5, d = 4", randn(g, 5, 4)),
            Case("a batch of heads (2, 3, 6, 8)", randn(g, 2, 3, 6, 8)),
            Case("T = 40, d = 16, base = 100", randn(g, 1, 40, 16), base=100.0),
            Case("one position, T = 1", randn(g, 2, 1, 8)),
        ],
        solution=lib("positional.apply_rope"),
        written=_rope,
        mistakes=[
            lambda x, base=10000.0: _rope(x, base, sign=-1.0),
            lambda x, base=10000.0: _rope(x, base, exponent="i/d"),
            lambda x, base=10000.0: _rope(x, base, layout="halves"),
        ],
        shortcuts=[lib("positional.apply_rope")],
    ),
)


# --------------------------------------------------------------------------------------
# Predict, then measure: does an ADDED sinusoidal code make the score shift-invariant?
# --------------------------------------------------------------------------------------
