"""Checks for chapter 8, "Positional encodings"."""

from __future__ import annotations

import torch

from ._compare import within
from ._engine import Check, Mistake, Prediction
from ._forbid import Forbidden

# --------------------------------------------------------------------------------------
# The sinusoidal table
# --------------------------------------------------------------------------------------
check_sinusoidal_encoding = Check(
    "check_sinusoidal_encoding",
    "fn(max_len, d_model) -> (max_len, d_model): PE[pos, 2i] = "
    "sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(same angle)",
    params=("max_len", "d_model"),
    mistakes=[
        Mistake("sine and cosine are swapped: sine in the even columns (2i), cosine in the odd ones."),
        Mistake("all sines first, then all cosines: interleave them, column 2i = sin and column "
                "2i+1 = cos of the same frequency."),
        Mistake("the exponent is i/d_model; it is 2i/d_model, where 2i is the even column index."),
    ],
    hints=["Each pair of columns (2i, 2i+1) shares one frequency; the frequencies fall "
           "geometrically from 1 to 1/10000 across the pairs.",
           "Build the (max_len, d_model/2) table of angles pos * frequency by broadcasting.",
           "Fill the even columns with one trigonometric function of the angles and the odd "
           "ones with the other (slicing with a step: [:, 0::2])."],
    forbidden=(Forbidden("course_lib.positional.sinusoidal_encoding"),),
)


# --------------------------------------------------------------------------------------
# A shift of position is a rotation
# --------------------------------------------------------------------------------------
check_shift_matrix = Check(
    "check_shift_matrix",
    "fn(k, w) -> (2, 2) M with M @ [sin(wp), cos(wp)] = "
    "[sin(w(p+k)), cos(w(p+k))] for every p",
    params=("k", "w"),
    mistakes=[
        Mistake("this is the transpose (a shift by -k): check the signs against the two lines of "
                "the angle-addition formulas."),
        Mistake("the shift k is missing from the angle: shifting by k positions turns by w * k."),
    ],
    hints=["Write sin(w(p+k)) and cos(w(p+k)) with the angle-addition formulas.",
           "Each line is a linear combination of sin(wp) and cos(wp) with coefficients that do "
           "not depend on p: those coefficients are the rows of M."],
    no_shortcut="no library function gives the rotation matrix of a shift",
)


# --------------------------------------------------------------------------------------
# ALiBi: a relative position bias added to the scores
# --------------------------------------------------------------------------------------
check_alibi_bias = Check(
    "check_alibi_bias",
    "fn(T, slope) -> (T, T) float: -slope * (i - j) for keys j <= i, -inf "
    "for j > i",
    params=("T", "slope"),
    mistakes=[
        Mistake("the future is not masked: set bias[i, j] = -inf for j > i."),
        Mistake("the sign is flipped: distant keys must get a LOWER score (-slope * distance)."),
        Mistake("ALiBi is a float bias added to the scores, not a bool mask."),
    ],
    hints=["Entry (i, j) depends only on the distance i - j between the query and the key.",
           "Build that (T, T) distance table by broadcasting two aranges; the further back the "
           "key, the lower its bias.",
           "The bias is added to the scores before the softmax: a key that must get zero weight "
           "needs -inf."],
    forbidden=(Forbidden("course_lib.positional.alibi_bias"),),
)


# --------------------------------------------------------------------------------------
# RoPE: rotate the queries and keys by their positions
# --------------------------------------------------------------------------------------
check_apply_rope = Check(
    "check_apply_rope",
    "fn(x (..., T, d), base=10000.0) -> (..., T, d): feature pair (2i, 2i+1) "
    "of position t rotated by the angle t * base^(-2i/d)",
    params=("x",),
    mistakes=[
        Mistake("the rotation turns the wrong way: the first coordinate of a pair becomes "
                "x_2i cos - x_2i+1 sin, the second x_2i sin + x_2i+1 cos."),
        Mistake("the exponent is i/d; it is 2i/d, with 2i the index of the pair's first column "
                "(the frequencies of the sinusoidal encoding)."),
        Mistake("the pairs are (i, i + d/2), the first half against the second half; this "
                "exercise pairs neighbouring columns (2i, 2i+1)."),
    ],
    hints=["Each pair of columns (2i, 2i+1) turns by its own angle, proportional to the position: "
           "build the (T, d/2) table of angles by broadcasting.",
           "Take the even and the odd columns apart with slices with a step; each pair (a, b) "
           "becomes a 2-D vector turned by the angle.",
           "Put the two rotated halves back in alternating columns: stack them on a new last dim "
           "and flatten the last two dims."],
    forbidden=(Forbidden("course_lib.positional.apply_rope"),),
)


# --------------------------------------------------------------------------------------
# Predict, then measure: does an ADDED sinusoidal code make the score shift-invariant?
# --------------------------------------------------------------------------------------
def added_score_change(d_model=16, shifts=100, i=3, j=5, seed=0):
    """The largest change of the score (x_a + PE[i+s]) . (x_b + PE[j+s]) over the shifts
    s = 1..shifts: two random N(0, 1) content vectors, the sinusoidal table of
    `positional.sinusoidal_encoding`, positions i and j moved together (the offset stays j - i)."""
    from course_lib.positional import sinusoidal_encoding as table

    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, d_model, generator=g)
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
