"""Checks for the chapter "Scaled dot-product attention"."""

from __future__ import annotations

import torch

from ._compare import ATOL, compare, within
from ._engine import Check, Mistake, Prediction
from ._forbid import AUTOGRAD, Forbidden

# What computes attention for you: off limits wherever the learner writes a part of it.
SDPA = (Forbidden("course_lib.attention.scaled_dot_product_attention"),
        Forbidden("course_lib.attention.attend"),
        Forbidden("torch.nn.functional.scaled_dot_product_attention"),
        Forbidden("torch.nn.MultiheadAttention", label="torch.nn.MultiheadAttention"))

# --------------------------------------------------------------------------------------
# Scaled dot-product scores
# --------------------------------------------------------------------------------------
check_scaled_dot_score = Check(
    "check_scaled_dot_score",
    "fn(q (..., T_q, d_k), k (..., T_k, d_k)) -> q k^T / sqrt(d_k), (..., T_q, T_k)",
    params=("q", "k"),
    forbidden=(Forbidden("course_lib.attention.scaled_dot_score"),
               Forbidden("course_lib.attention.dot_score")),
    mistakes=[
        Mistake("the scores are not scaled: divide by sqrt(d_k)."),
        Mistake("the scores are divided by d_k; divide by sqrt(d_k) instead."),
        Mistake("the result is (T_k, T_q): compute q @ k^T (queries index the rows), not k @ q^T."),
        Mistake("k.T reverses ALL the dims of a batched tensor: swap only the last two, "
                "k.transpose(-2, -1)."),
    ],
    hints=["The score of query i and key j is their dot product: for all pairs at once, multiply "
           "q by k with k's last two dims swapped.",
           "Swap the dims with k.transpose(-2, -1), so that any batch dims stay in front.",
           "Then scale: a dot product of d_k unit-variance terms has variance d_k."],
)


# --------------------------------------------------------------------------------------
# Masked softmax
# --------------------------------------------------------------------------------------
_NAN_ROW = ("a fully masked row came out as NaN (the softmax of a row of -inf is 0/0). The "
            "convention is a row of zeros: set such rows to 0.")
_UNIFORM_ROW = ("a fully masked row is uniform: a large negative number instead of -inf spreads "
                "the weight evenly. The convention is a row of zeros.")


def _weights_pattern(got, mask):
    """Mistakes that show in the weights whatever code made them (NaN, uniform or column-wise)."""
    if not isinstance(got, torch.Tensor) or got.shape != mask.shape or not got.is_floating_point():
        return None
    empty = ~mask.any(-1)  # query rows with no allowed key
    if bool(torch.isnan(got[empty]).any()):
        return _NAN_ROW
    if bool(torch.isnan(got).any()):
        return "NaN appeared: exp of large scores overflows; subtract each row's max before exp."
    if bool(empty.any()) and torch.allclose(got[empty], torch.full_like(got[empty], 1 / got.shape[-1]),
                                            atol=ATOL):
        return _UNIFORM_ROW
    sums = got.detach().double().sum(-2)
    if bool(((sums - 1).abs() < 1e-4).all()):
        return "the weights sum to 1 down each column: take the softmax over dim=-1 (the keys)."
    return None


check_masked_softmax = Check(
    "check_masked_softmax", "fn(scores, mask) -> weights: softmax over the last dim where mask "
    "(bool, broadcastable) is True; a row with no allowed key gives zeros",
    params=("scores", "mask"),
    forbidden=(Forbidden("course_lib.attention.masked_softmax"), *SDPA),
    mistakes=[
        Mistake(_NAN_ROW),
        Mistake("the mask is inverted: True means ALLOWED (attend), False means masked out."),
        Mistake("the weights sum to 1 down each column: take the softmax over dim=-1 (the keys)."),
        Mistake(_UNIFORM_ROW),
        Mistake("the mask is ignored: disallowed keys must get zero weight."),
        Mistake("NaN appeared: exp of large scores overflows (inf / inf). Subtract each row's "
                "max before exp (torch.softmax does this for you)."),
    ],
    diagnose=lambda args, kwargs, got, expected: _weights_pattern(got, args[1].expand_as(args[0])),
    hints=["Give the disallowed scores a value whose exponential is exactly 0, then take the "
           "softmax over the keys (the last dim).",
           "masked_fill(~mask, float('-inf')) does the first part; mind which value of the mask "
           "means 'allowed'.",
           "A row that is all -inf gives 0/0 = NaN: detect those rows (mask.any(-1)) or replace "
           "NaN by 0 after the softmax."],
)


# --------------------------------------------------------------------------------------
# Causal mask
# --------------------------------------------------------------------------------------
def _causal_symptoms(got, expected):
    """The comparison of a causal mask, reported as what each query may read: the keys after it
    that the mask lets it read, and the keys 0..t that it hides (a causal mask: none of either)."""
    problem = compare(got, expected)
    if (problem is None or not isinstance(got, torch.Tensor) or got.dtype != torch.bool
            or got.shape != expected.shape or expected.dim() != 2):
        return problem
    T = expected.shape[0]
    later = (got & ~expected).sum(-1)                              # (T,): keys s > t readable
    hidden = (~got & expected).sum(-1)                             # (T,): keys s <= t hidden
    found = []
    for count, what in ((later, "later key(s) s > t"), (hidden, "of the keys 0..t hidden")):
        rows = count.nonzero().flatten().tolist()
        if rows:
            most = int(count.max())
            verb = "lets query t read" if count is later else "keeps"
            found.append(f"in {len(rows)} of its {T} rows (first row {rows[0]}) your mask {verb} "
                         f"up to {most} {what}")
    return f"{problem.split(';')[0]}. Measured on your mask for T = {T}: " + "; ".join(found) + (
        ". A causal mask lets query t read the keys 0..t and none after them.")


check_causal_mask = Check(
    "check_causal_mask", "fn(T) -> (T, T) bool mask, True where query i may attend to key j <= i",
    cause_label="Measured",  # a debugging exercise: the check reports a measurement, not the bug
    params=("T",),
    compare=_causal_symptoms,
    forbidden=(Forbidden("course_lib.attention.causal_mask"),
               Forbidden("torch.nn.Transformer.generate_square_subsequent_mask")),
    mistakes=[
        Mistake("query t may read exactly the keys a causal mask hides (s > t) and none of the "
                "ones it allows: the polarity is inverted."),
        Mistake("query t may read itself and every key after it, and no key before it: this is "
                "the upper triangle."),
        Mistake("query t may read every key before it but not its own: the diagonal is missing."),
        Mistake("masks are bool tensors (dtype=torch.bool or .bool()), not numbers."),
    ],
    hints=["Measure before reading: for each row t (the query) of your mask, count the keys "
           "after t it allows and the keys at or before t it hides. A causal mask has 0 and 0.",
           "Under a causal mask a position's output does not move when only later tokens change: "
           "measure that change for every t with your mask, and compare with the counts."],
)


# --------------------------------------------------------------------------------------
# Scaled dot-product attention
# --------------------------------------------------------------------------------------
def _allowed(kwargs, weights):
    mask = kwargs.get("mask")
    return (torch.ones_like(weights, dtype=torch.bool) if mask is None else mask.expand(weights.shape))


check_attention = Check(
    "check_attention", "fn(q, k, v, mask=None) -> (out (..., T_q, d_v), weights (..., T_q, T_k))",
    params=("q", "k", "v"), outputs=("out", "weights"),
    forbidden=(*SDPA, Forbidden("course_lib.attention.masked_softmax")),
    mistakes=[
        Mistake("the scores are not scaled: divide q @ k^T by sqrt(d_k)."),
        Mistake("the outputs are swapped: return (out, weights), the output first."),
        Mistake("the mask is inverted: True means ALLOWED."),
        Mistake(_NAN_ROW),
        Mistake("the mask is ignored: disallowed keys must get zero weight."),
        Mistake("the weights sum to 1 down each column: take the softmax over dim=-1 (the keys)."),
    ],
    diagnose=lambda args, kwargs, got, expected: _weights_pattern(
        got[1] if isinstance(got, (tuple, list)) and len(got) == 2 else None,
        _allowed(kwargs, expected[1])),
    hints=["Three steps: the scores, the weights, the weighted sum of the values.",
           "The weights are a masked softmax of the scaled scores over the keys; mask=None "
           "means every key is allowed.",
           "out = weights @ v; return (out, weights)."],
)


# --------------------------------------------------------------------------------------
# Predict, then measure: when does an unscaled softmax saturate?
# --------------------------------------------------------------------------------------
_T, _QUERIES, _GRID = 16, 2000, [2**e for e in range(11)]


def saturation_dk(statistic=torch.median, seed=0):
    """The experiment of the prediction below: the smallest d_k in 1, 2, 4, ..., 1024 at which
    ``statistic`` (over 2000 random queries) of the largest softmax weight of UNSCALED scores
    q.k over T = 16 random keys reaches 0.9; q and k have i.i.d. N(0, 1) entries. None if it
    never does."""
    g = torch.Generator().manual_seed(seed)
    for d_k in _GRID:
        q, k = torch.randn(_QUERIES, 1, d_k, generator=g), torch.randn(_QUERIES, _T, d_k, generator=g)
        largest = torch.softmax((q @ k.transpose(-2, -1))[:, 0], dim=-1).max(-1).values  # (queries,)
        if float(statistic(largest)) >= 0.9:
            return d_k
    return None


check_saturation_prediction = Prediction(
    "check_saturation_prediction", "your prediction of the d_k at which a typical query's "
    "largest weight reaches 0.9 (unscaled scores, T = 16 keys), against the measurement",
    quantity="the d_k at which the median largest weight reaches 0.9",
    tolerance=within(factor=2.0), example=64,
    explanation=("unscaled, q.k has standard deviation sqrt(d_k), so the gaps between the 16 "
                 "scores grow like sqrt(d_k) and the softmax approaches an argmax. With "
                 "unit-variance queries and keys the largest weight reaches 0.9 at about "
                 "d_k = 64, a common head size, where the softmax has almost no gradient left. "
                 "Dividing by sqrt(d_k) keeps the scores at unit scale for every d_k."),
    mistakes=[
        Mistake("saturation comes much earlier: the spread of the scores grows like sqrt(d_k), "
                "so a moderate d_k already separates the best key clearly.", lambda m: 16 * m),
        Mistake("a weight of 0.9 over 16 keys needs the best score to beat the others by about "
                "ln(9 * 15) = 4.9, that is several standard deviations when d_k is small.",
                lambda m: m / 16),
    ],
)


# --------------------------------------------------------------------------------------
# A padding mask from the lengths
# --------------------------------------------------------------------------------------
check_padding_mask = Check(
    "check_padding_mask", "fn(lengths (B,) int64, T) -> (B, 1, 1, T) bool: True at the real "
    "(non-pad) key positions, broadcastable over heads and queries",
    params=("lengths", "T"),
    forbidden=(Forbidden("course_lib.attention.padding_mask"),
               Forbidden("course_lib.attention.padding_mask_from_tokens")),
    mistakes=[
        Mistake("the polarity is inverted: True marks the ALLOWED (real) positions, False the pads."),
        Mistake("off by one: a sequence of length L has real positions 0, ..., L - 1."),
        Mistake("the mask has shape (B, T): give it the dims (B, 1, 1, T) so that it broadcasts over "
                "the heads and the queries of the (B, h, T_q, T) scores."),
        Mistake("this masks the queries, (B, 1, T, 1): a padding mask hides the KEYS, (B, 1, 1, T)."),
    ],
    hints=["Position j of sequence b is real when j is smaller than that sequence's length.",
           "Compare a (T,) row of positions with a (B, 1) column of lengths: broadcasting gives "
           "(B, T).",
           "Then add the two singleton dims where the scores have their heads and queries."],
)


# --------------------------------------------------------------------------------------
# The gradient that reaches the queries, by hand
# --------------------------------------------------------------------------------------
def _no_grad(fn, *args, **kwargs):
    with torch.no_grad():
        return fn(*args, **kwargs)


check_attention_grad_q = Check(
    "check_attention_grad_q", "fn(q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v), "
    "grad_out (..., T_q, d_v)) -> dL/dq (..., T_q, d_k) for L = sum(grad_out * out), out = "
    "softmax(q k^T / sqrt(d_k)) v, written by hand (it runs under torch.no_grad(); autograd is "
    "off limits)",
    params=("q", "k", "v", "grad_out"),
    call=_no_grad, forbidden=AUTOGRAD,
    mistakes=[
        Mistake("the 1/sqrt(d_k) is missing: s = q.k / sqrt(d_k), so ds/dq = k / sqrt(d_k)."),
        Mistake("the scale is applied twice or as 1/d_k: s = q.k / sqrt(d_k) contributes one "
                "factor 1/sqrt(d_k) to ds/dq (the softmax takes the scaled scores)."),
        Mistake("only the diagonal of the softmax Jacobian diag(p) - p p^T is used: every score "
                "moves every weight, so subtract the p-weighted mean of dL/dp in each row."),
        Mistake("the softmax was skipped in the chain rule: dL/ds is not dL/dp, it passes through "
                "the Jacobian diag(p) - p p^T."),
        Mistake("the last step drops the 1/sqrt(d_k): the softmax takes the scaled scores, and "
                "ds/dq = k / sqrt(d_k) brings the factor once more."),
    ],
    hints=["Go backwards through out = p v, p = softmax(s), s = q k^T / sqrt(d_k): first dL/dp, "
           "then dL/ds, then dL/dq.",
           "dL/dp has the shape of p, (..., T_q, T_k); it comes from grad_out and v.",
           "For one row, (dL/ds)_j = sum_i (dL/dp_i) p_i (delta_ij - p_j): write it without a "
           "loop, with the row's p-weighted mean of dL/dp.",
           "Last, each score s_ij depends on q_i through k_j / sqrt(d_k)."],
)


# --------------------------------------------------------------------------------------
# Predict, then measure: many keys dilute even scaled attention
# --------------------------------------------------------------------------------------
check_dilution_prediction = Prediction(
    "check_dilution_prediction", "your prediction of a typical query's largest weight over "
    "T = 1024 keys, scaled scores, d_k = 64, against the measurement",
    quantity="the median largest weight over 1024 keys (scaled, d_k = 64)",
    tolerance=within(factor=2.0), example=0.0142,
    explanation=("dividing by sqrt(d_k) makes each score a unit-variance number whatever d_k, but "
                 "it does nothing about the NUMBER of keys. The best of 1024 unit-variance scores "
                 "lies only about 3.2 standard deviations above the others' mean, a factor of "
                 "about e^3.2 = 25 in weight, against about 1024 * e^0.5 = 1700 for the sum of all "
                 "exponentials: the largest weight is near 0.015, not 0.2 as with 16 keys, and not "
                 "1/1024 either. Long sequences dilute attention at initialisation; training has to "
                 "sharpen the scores (larger q and k) as the context grows."),
    mistakes=[
        Mistake("the scaling fixes the scores' variance, not the number of keys: with 64 times "
                "more keys competing the largest weight cannot stay where it was with 16.",
                lambda measured: 0.22),
        Mistake("the weights are not uniform: the best of many unit-variance scores is a few "
                "standard deviations above the rest, and exp makes that a factor of tens.",
                lambda measured: 1 / 1024),
    ],
    hints=["With 16 keys (the figure of the chapter) a typical query's largest weight is about "
           "0.2. What changes when 1024 keys compete, and what does not?",
           "The largest of T standard normal numbers is about sqrt(2 ln T); the softmax's "
           "denominator is about T times the mean of exp(s)."],
)
