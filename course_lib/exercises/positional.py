"""Checks for the chapter "Positional encodings"."""

from __future__ import annotations

import math

import torch

from ._compare import within
from ._engine import Case, Check, Mistake, Prediction, lib, randn


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


# --------------------------------------------------------------------------------------
# RoPE: rotate the queries and keys by their positions
# --------------------------------------------------------------------------------------
def _rope(x, base=10000.0, exponent="2i/d", sign=1.0, layout="interleaved"):
    """Rotary embedding of x (..., T, d) at positions 0..T-1; the keywords are the mistakes."""
    T, d = x.shape[-2], x.shape[-1]
    i = torch.arange(d // 2, dtype=torch.float64)
    frequency = base ** (-(2 * i if exponent == "2i/d" else i) / d)
    theta = torch.arange(T, dtype=torch.float64)[:, None] * frequency          # (T, d/2)
    cos, sin = torch.cos(theta).to(x.dtype), sign * torch.sin(theta).to(x.dtype)
    if layout == "halves":
        a, b = x[..., : d // 2], x[..., d // 2:]
        return torch.cat([a * cos - b * sin, a * sin + b * cos], -1)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], -1).flatten(-2)


check_apply_rope = Check(
    "check_apply_rope", "fn(x (..., T, d), base=10000.0) -> (..., T, d): feature pair (2i, 2i+1) "
    "of position t rotated by the angle t * base^(-2i/d)",
    params=("x",),
    reference=lib("positional.apply_rope"), seed=41,
    cases=lambda g: [Case("T = 5, d = 4", randn(g, 5, 4)),
                     Case("a batch of heads (2, 3, 6, 8)", randn(g, 2, 3, 6, 8)),
                     Case("T = 40, d = 16, base = 100", randn(g, 1, 40, 16), base=100.0),
                     Case("one position, T = 1", randn(g, 2, 1, 8))],
    mistakes=[
        Mistake("the rotation turns the wrong way: the first coordinate of a pair becomes "
                "x_2i cos - x_2i+1 sin, the second x_2i sin + x_2i+1 cos.",
                lambda x, base=10000.0: _rope(x, base, sign=-1.0)),
        Mistake("the exponent is i/d; it is 2i/d, with 2i the index of the pair's first column "
                "(the frequencies of the sinusoidal encoding).",
                lambda x, base=10000.0: _rope(x, base, exponent="i/d")),
        Mistake("the pairs are (i, i + d/2), the first half against the second half; this "
                "exercise pairs neighbouring columns (2i, 2i+1).",
                lambda x, base=10000.0: _rope(x, base, layout="halves")),
    ],
    hints=["Each pair of columns (2i, 2i+1) turns by its own angle, proportional to the position: "
           "build the (T, d/2) table of angles by broadcasting.",
           "Take the even and the odd columns apart with slices with a step; each pair (a, b) "
           "becomes a 2-D vector turned by the angle.",
           "Put the two rotated halves back in alternating columns: stack them on a new last dim "
           "and flatten the last two dims."],
)


# --------------------------------------------------------------------------------------
# Predict, then measure: does an ADDED sinusoidal code make the score shift-invariant?
# --------------------------------------------------------------------------------------
def added_score_change(d_model=16, shifts=100, i=3, j=5, seed=0):
    """The largest change of the score (x_a + PE[i+s]) . (x_b + PE[j+s]) over the shifts
    s = 1..shifts: two random N(0, 1) content vectors, the sinusoidal table of
    `positional.sinusoidal_encoding`, positions i and j moved together (the offset stays j - i)."""
    table = lib("positional.sinusoidal_encoding")
    g = torch.Generator().manual_seed(seed)
    x = randn(g, 2, d_model)
    pe = table(j + shifts + 1, d_model)
    s = torch.arange(shifts + 1)
    score = ((x[0] + pe[i + s]) * (x[1] + pe[j + s])).sum(-1)      # (shifts + 1,)
    return round(float((score - score[0]).abs().max()), 3)


check_added_score_prediction = Prediction(
    "check_added_score_prediction", "your prediction of how much the score (x_a + PE_i).(x_b + PE_j) "
    "changes (largest change) when both positions move together by up to 100, against the measurement",
    quantity="the largest change of the score when i and j move together (d_model = 16)",
    tolerance=within(abs=3.0), example=6.0,
    explanation=("property 3 of the chapter holds for PE_i . PE_j alone: that term depends on the "
                 "offset only and does not change. But the score of ADDED codes has two more terms "
                 "that mix content and position, x_a . PE_j and PE_i . x_b, and those change with the "
                 "absolute positions (each is at most |x| |PE| = 4 x 2.8 in size and swings between "
                 "signs). So an absolute code added to the input does not give shift-invariant scores: "
                 "a model must learn to cancel the mixed terms. RoPE rotates q and k instead, and its "
                 "score does not change at all under a common shift (the chapter measures it)."),
    mistakes=[
        Mistake("the score of ADDED codes is not shift-invariant: PE_i . PE_j depends on the offset "
                "only, but the mixed terms x_a . PE_j and PE_i . x_b depend on the absolute positions.",
                lambda measured: 0.0),
        Mistake("only the two mixed terms change (the content term and PE . PE do not), and each is "
                "bounded by |x| |PE|: the change is a few units, not tens.",
                lambda measured: 4 * measured),
    ],
    hints=["Expand the product (x_a + PE_i) . (x_b + PE_j) into four terms. Which of them change when "
           "i and j move together?",
           "x_a has norm about sqrt(16) = 4, a row of the table has norm sqrt(8): how large can "
           "x_a . PE_j be, and how much can it swing as j moves?"],
)
