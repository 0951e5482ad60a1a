"""Checks for the chapter "Positional encodings"."""

from __future__ import annotations

import math
from typing import Callable

import torch

from ._engine import Case, CheckResult, _run_cases, _same


def _positional():
    from course_lib import positional  # imported lazily: the checks only need it when run

    return positional


# --------------------------------------------------------------------------------------
# The sinusoidal table
# --------------------------------------------------------------------------------------
_SINUSOIDAL_HINT = ("PE[pos, 2i] = sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(same angle): "
                    "sines in the even columns, cosines in the odd ones, one frequency per pair.")


def check_sinusoidal_encoding(fn: Callable) -> CheckResult:
    """Check ``fn(max_len, d_model) -> (max_len, d_model)`` (even d_model)."""
    cases = [Case(f"max_len = {n}, d_model = {d}", (n, d), names=("max_len", "d_model"))
             for n, d in [(10, 4), (50, 16), (1, 8), (100, 64)]]

    def diagnose(case, got, expected):
        n, d = case.args
        if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
            return None
        if _same(got[:, 0::2], expected[:, 1::2]) and _same(got[:, 1::2], expected[:, 0::2]):
            return "sine and cosine are swapped: sine in the even columns (2i), cosine in the odd ones."
        if _same(got, torch.cat([expected[:, 0::2], expected[:, 1::2]], 1)):
            return ("all sines first, then all cosines: interleave them, column 2i = sin and "
                    "column 2i+1 = cos of the same frequency.")
        pos = torch.arange(n, dtype=torch.float32)[:, None]
        i = torch.arange(d // 2, dtype=torch.float32)
        wrong = pos / 10000 ** (i / d)  # exponent i/d instead of 2i/d
        alt = torch.zeros(n, d)
        alt[:, 0::2], alt[:, 1::2] = torch.sin(wrong), torch.cos(wrong)
        if _same(got, alt):
            return "the exponent is i/d_model; it is 2i/d_model, where 2i is the even column index."
        return None

    return _run_cases("check_sinusoidal_encoding", fn,
                      lambda n, d: _positional().sinusoidal_encoding(n, d), cases,
                      _SINUSOIDAL_HINT, diagnose=diagnose)


# --------------------------------------------------------------------------------------
# A shift of position is a rotation
# --------------------------------------------------------------------------------------
_SHIFT_HINT = ("sin(w(p+k)) = sin(wp)cos(wk) + cos(wp)sin(wk) and cos(w(p+k)) = cos(wp)cos(wk) - "
               "sin(wp)sin(wk): write these two lines as a 2 x 2 matrix acting on (sin(wp), cos(wp)).")


def _reference_shift(k, w):
    c, s = math.cos(w * k), math.sin(w * k)
    return torch.tensor([[c, s], [-s, c]])


def check_shift_matrix(fn: Callable) -> CheckResult:
    """Check ``fn(k, w) -> (2, 2)`` M with M @ [sin(wp), cos(wp)] = [sin(w(p+k)), cos(w(p+k))]."""
    cases = [Case(f"k = {k}, w = {w}", (k, w), names=("k", "w"))
             for k, w in [(1, 1.0), (3, 0.1), (0, 0.5), (-2, 0.01), (7, 1e-4)]]

    def diagnose(case, got, expected):
        if isinstance(got, torch.Tensor) and got.shape == (2, 2) and _same(got, expected.T):
            return ("this is the transpose (a shift by -k): check the signs against the two lines "
                    "of the angle-addition formulas.")
        return None

    return _run_cases("check_shift_matrix", fn, _reference_shift, cases, _SHIFT_HINT,
                      diagnose=diagnose)


# --------------------------------------------------------------------------------------
# ALiBi: a relative position bias added to the scores
# --------------------------------------------------------------------------------------
_ALIBI_HINT = ("bias[i, j] = -slope * (i - j) for keys j <= i (the further back, the lower), and "
               "-inf for j > i (causal). It is a float mask: it is ADDED to the scores.")


def _reference_alibi(T, slope):
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    bias = -slope * (i - j).float()
    return bias.masked_fill(j > i, -math.inf)


def check_alibi_bias(fn: Callable) -> CheckResult:
    """Check ``fn(T, slope) -> (T, T)`` float: -slope*(i-j) on and below the diagonal, -inf above."""
    cases = [Case(f"T = {T}, slope = {m}", (T, m), names=("T", "slope"))
             for T, m in [(4, 0.5), (1, 1.0), (6, 0.25), (8, 2.0)]]

    def diagnose(case, got, expected):
        if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
            return None
        if got.dtype == torch.bool:
            return "ALiBi is a float bias added to the scores, not a bool mask."
        below = torch.isfinite(expected)
        if torch.isfinite(got).all() and _same(got[below], expected[below]):
            return "the future is not masked: set bias[i, j] = -inf for j > i."
        if _same(got[below], -expected[below]):
            return "the sign is flipped: distant keys must get a LOWER score (-slope * distance)."
        return None

    return _run_cases("check_alibi_bias", fn, _reference_alibi, cases, _ALIBI_HINT,
                      diagnose=diagnose)
