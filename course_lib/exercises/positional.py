"""Checks for the chapter "Positional encodings"."""

from __future__ import annotations

import math

import torch

from ._engine import Case, Check, Mistake, lib


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


check_sinusoidal_encoding = Check(
    "check_sinusoidal_encoding", "fn(max_len, d_model) -> (max_len, d_model): PE[pos, 2i] = "
    "sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(same angle)",
    params=("max_len", "d_model"),
    reference=lib("positional.sinusoidal_encoding"),
    cases=lambda g: [Case(f"max_len = {n}, d_model = {d}", n, d)
                     for n, d in [(10, 4), (50, 16), (1, 8), (100, 64)]],
    mistakes=[
        Mistake("sine and cosine are swapped: sine in the even columns (2i), cosine in the odd ones.",
                lambda n, d: _table(n, d, layout="swapped")),
        Mistake("all sines first, then all cosines: interleave them, column 2i = sin and column "
                "2i+1 = cos of the same frequency.", lambda n, d: _table(n, d, layout="blocks")),
        Mistake("the exponent is i/d_model; it is 2i/d_model, where 2i is the even column index.",
                lambda n, d: _table(n, d, exponent=lambda i, d: i / d)),
    ],
    hints=["Each pair of columns (2i, 2i+1) shares one frequency; the frequencies fall "
           "geometrically from 1 to 1/10000 across the pairs.",
           "Build the (max_len, d_model/2) table of angles pos * frequency by broadcasting.",
           "Fill the even columns with one trigonometric function of the angles and the odd "
           "ones with the other (slicing with a step: [:, 0::2])."],
)


# --------------------------------------------------------------------------------------
# A shift of position is a rotation
# --------------------------------------------------------------------------------------
def _rotation(angle):
    c, s = math.cos(angle), math.sin(angle)
    return torch.tensor([[c, s], [-s, c]])


check_shift_matrix = Check(
    "check_shift_matrix", "fn(k, w) -> (2, 2) M with M @ [sin(wp), cos(wp)] = "
    "[sin(w(p+k)), cos(w(p+k))] for every p",
    params=("k", "w"),
    reference=lambda k, w: _rotation(w * k),
    cases=lambda g: [Case(f"k = {k}, w = {w}", k, w)
                     for k, w in [(1, 1.0), (3, 0.1), (0, 0.5), (-2, 0.01), (7, 1e-4)]],
    mistakes=[
        Mistake("this is the transpose (a shift by -k): check the signs against the two lines of "
                "the angle-addition formulas.", lambda k, w: _rotation(w * k).T),
        Mistake("the shift k is missing from the angle: shifting by k positions turns by w * k.",
                lambda k, w: _rotation(w)),
    ],
    hints=["Write sin(w(p+k)) and cos(w(p+k)) with the angle-addition formulas.",
           "Each line is a linear combination of sin(wp) and cos(wp) with coefficients that do "
           "not depend on p: those coefficients are the rows of M."],
)


# --------------------------------------------------------------------------------------
# ALiBi: a relative position bias added to the scores
# --------------------------------------------------------------------------------------
def _alibi(T, slope, sign=-1.0, causal=True):
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    bias = sign * slope * (i - j).float()
    return bias.masked_fill(j > i, -math.inf) if causal else bias


check_alibi_bias = Check(
    "check_alibi_bias", "fn(T, slope) -> (T, T) float: -slope * (i - j) for keys j <= i, -inf "
    "for j > i",
    params=("T", "slope"),
    reference=_alibi,
    cases=lambda g: [Case(f"T = {T}, slope = {m}", T, m) for T, m in [(4, 0.5), (1, 1.0), (6, 0.25),
                                                                      (8, 2.0)]],
    mistakes=[
        Mistake("the future is not masked: set bias[i, j] = -inf for j > i.",
                lambda T, m: _alibi(T, m, causal=False)),
        Mistake("the sign is flipped: distant keys must get a LOWER score (-slope * distance).",
                lambda T, m: _alibi(T, m, sign=1.0)),
        Mistake("ALiBi is a float bias added to the scores, not a bool mask.",
                lambda T, m: torch.ones(T, T, dtype=torch.bool).tril()),
    ],
    hints=["Entry (i, j) depends only on the distance i - j between the query and the key.",
           "Build that (T, T) distance table by broadcasting two aranges; the further back the "
           "key, the lower its bias.",
           "The bias is added to the scores before the softmax: a key that must get zero weight "
           "needs -inf."],
)
