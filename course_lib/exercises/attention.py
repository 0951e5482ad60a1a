"""Checks for the chapter "Scaled dot-product attention"."""

from __future__ import annotations

import math
from typing import Any, Callable, Optional

import torch

from ._engine import ATOL, Case, CheckResult, _compare, _randn, _run_cases, _same, _type_name


def _ref():
    from course_lib import attention  # imported lazily: the checks only need it when run

    return attention


# --------------------------------------------------------------------------------------
# Scaled dot-product scores
# --------------------------------------------------------------------------------------
_SCORE_HINT = ("scores = q @ k^T / sqrt(d_k), where d_k = q.shape[-1]. Transpose only the last two "
               "dims of k (k.transpose(-2, -1)), so that batch dims stay in front.")


def check_scaled_dot_score(fn: Callable) -> CheckResult:
    """Check ``fn(q, k) -> (..., T_q, T_k)`` scores ``q k^T / sqrt(d_k)``."""
    g = torch.Generator().manual_seed(0)
    names = ("q", "k")
    cases = [
        Case("T_q != T_k", (_randn(g, 3, 4), _randn(g, 5, 4)), names=names),
        Case("batch and head dims", (_randn(g, 2, 3, 4, 8), _randn(g, 2, 3, 6, 8)), names=names),
        Case("d_k = 1", (_randn(g, 4, 1), _randn(g, 6, 1)), names=names),
        Case("a single query", (_randn(g, 2, 1, 16), _randn(g, 2, 7, 16)), names=names),
    ]
    return _run_cases("check_scaled_dot_score", fn, lambda q, k: _ref().scaled_dot_score(q, k),
                      cases, _SCORE_HINT, diagnose=_diagnose_score)


def _diagnose_score(case: Case, got: Any, expected: torch.Tensor) -> Optional[str]:
    q, k = case.args
    d_k = q.shape[-1]
    flipped = expected.transpose(-2, -1).shape
    if isinstance(got, torch.Tensor) and got.shape == flipped != expected.shape:
        return "the result is (T_k, T_q): compute q @ k^T (queries index the rows), not k @ q^T."
    if _same(got, expected * math.sqrt(d_k)):
        return "the scores are not scaled: divide by sqrt(d_k)."
    if _same(got, expected / math.sqrt(d_k)):
        return "the scores are divided by d_k; divide by sqrt(d_k) instead."
    if _same(got, expected * d_k):
        return "the scores are multiplied by sqrt(d_k); divide by it instead."
    return None


# --------------------------------------------------------------------------------------
# Masked softmax
# --------------------------------------------------------------------------------------
_SOFTMAX_HINT = ("set the scores of disallowed keys (mask == False) to -inf, take the softmax over "
                 "the last dim (the keys), and make rows with no allowed key all zeros.")


def _masked_softmax_cases() -> list[Case]:
    g = torch.Generator().manual_seed(1)
    names = ("scores", "mask")
    random_mask = torch.rand(4, 6, generator=g) > 0.4
    random_mask[:, 0] = True  # every row keeps at least one key
    padding = torch.ones(2, 1, 1, 5, dtype=torch.bool)
    padding[0, ..., 3:] = False  # first sequence: the last two keys are padding
    fully_masked = torch.ones(3, 4, dtype=torch.bool)
    fully_masked[1] = False  # query 1 may attend to nothing
    return [
        Case("random mask", (_randn(g, 4, 6), random_mask), names=names),
        Case("everything allowed", (_randn(g, 3, 5), torch.ones(3, 5, dtype=torch.bool)),
             names=names),
        Case("padding mask broadcast over heads and queries",
             (_randn(g, 2, 3, 4, 5), padding), names=names),
        Case("causal (T, T) mask broadcast over the batch",
             (_randn(g, 2, 5, 5), torch.ones(5, 5, dtype=torch.bool).tril()), names=names),
        Case("a query row with no allowed key (fully masked)", (_randn(g, 3, 4), fully_masked),
             names=names),
        Case("large scores (numerical stability)",
             (_randn(g, 3, 6, scale=500.0), torch.ones(3, 6, dtype=torch.bool)), names=names),
    ]


def check_masked_softmax(fn: Callable) -> CheckResult:
    """Check ``fn(scores, mask)``: softmax over the last dim where ``mask`` (bool) is True."""
    return _run_cases("check_masked_softmax", fn, lambda s, m: _ref().masked_softmax(s, m),
                      _masked_softmax_cases(), _SOFTMAX_HINT, diagnose=_diagnose_softmax)


def _diagnose_softmax(case: Case, got: Any, expected: torch.Tensor) -> Optional[str]:
    scores, mask = case.args
    return _diagnose_weights(got, expected, mask.expand_as(scores),
                             lambda m: _ref().masked_softmax(scores, m))


def _diagnose_weights(got: Any, expected: torch.Tensor, mask: torch.Tensor,
                      with_mask: Callable[[torch.Tensor], Any]) -> Optional[str]:
    """Common mistakes of attention weights: NaN rows, inverted mask, wrong dim, no mask."""
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        return None
    empty_rows = ~mask.any(-1)  # query rows with no allowed key
    nan = torch.isnan(got)
    if bool(nan.any()):
        if bool(nan[empty_rows].any()):
            return ("a fully masked row came out as NaN (softmax of a row of -inf is 0/0). "
                    "The convention is a row of zeros: set such rows to 0 after the softmax.")
        return ("NaN appeared: exp of large scores overflows. Subtract each row's max before "
                "exp (torch.softmax does this for you).")
    if bool(empty_rows.any()) and torch.allclose(got[empty_rows], torch.full_like(
            got[empty_rows], 1.0 / got.shape[-1]), atol=ATOL):
        return ("a fully masked row is uniform: filling with a large negative number instead of "
                "-inf spreads the weight evenly. The convention is a row of zeros.")
    if _same(got, with_mask(~mask)):
        return "the mask is inverted: True means ALLOWED (attend), False means masked out."
    if _normalised(got, -2) and not _normalised(got, -1):
        return "the weights sum to 1 down each column: take the softmax over dim=-1 (keys)."
    if not bool(mask.all()) and _same(got, with_mask(torch.ones_like(mask))):
        return "the mask is ignored: disallowed keys must get zero weight."
    return None


def _normalised(w: torch.Tensor, dim: int) -> bool:
    """Every slice along ``dim`` sums to 1 (or is all zeros)."""
    s = torch.nan_to_num(w.detach().double()).sum(dim)
    return bool((((s - 1).abs() < 1e-4) | (s.abs() < 1e-6)).all())


# --------------------------------------------------------------------------------------
# Causal mask
# --------------------------------------------------------------------------------------
_CAUSAL_HINT = ("causal_mask(T)[i, j] is True when query i may attend to key j, i.e. j <= i: "
                "the lower triangle with the diagonal (torch.tril), as a bool tensor.")


def check_causal_mask(fn: Callable) -> CheckResult:
    """Check ``fn(T) -> (T, T)`` bool mask, True on and below the diagonal."""
    cases = [Case(f"T = {T}", (T,), names=("T",)) for T in (5, 1, 2, 8)]
    return _run_cases("check_causal_mask", fn, lambda T: _ref().causal_mask(T), cases,
                      _CAUSAL_HINT, diagnose=_diagnose_causal)


def _diagnose_causal(case: Case, got: Any, expected: torch.Tensor) -> Optional[str]:
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        return None
    values = got.detach() != 0  # the pattern, whatever the dtype
    dtype_note = ""
    if got.dtype != torch.bool:
        dtype_note = (f"the mask has dtype {got.dtype}; masks are bool tensors "
                      f"(dtype=torch.bool or .bool()). ")
    if bool((values == expected).all()):
        return dtype_note.strip() or None
    if bool((values == ~expected).all()):
        return (dtype_note + "the polarity is inverted: True must mark the ALLOWED positions "
                "(on and below the diagonal), not the masked ones.")
    if bool((values == expected.T).all()):
        return dtype_note + "this is the upper triangle: row i (query) may see keys j <= i."
    if bool((values == expected.tril(-1)).all()):
        return dtype_note + "the diagonal is missing: a position may attend to itself."
    return dtype_note.strip() or None


# --------------------------------------------------------------------------------------
# Scaled dot-product attention
# --------------------------------------------------------------------------------------
_ATTENTION_HINT = ("weights = masked_softmax(q @ k^T / sqrt(d_k), mask) over the keys (dim=-1), "
                   "with mask=None meaning everything allowed; out = weights @ v. Return "
                   "(out, weights) in that order.")


def _attention_cases() -> list[Case]:
    g = torch.Generator().manual_seed(2)
    names = ("q", "k", "v")
    padding = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    padding[1, ..., 4:] = False
    fully_masked = torch.ones(4, 5, dtype=torch.bool)
    fully_masked[2] = False
    return [
        Case("no mask, T_q != T_k, d_v != d_k", (_randn(g, 3, 4), _randn(g, 5, 4), _randn(g, 5, 6)),
             names=names),
        Case("batch and heads with a padding mask",
             (_randn(g, 2, 2, 4, 8), _randn(g, 2, 2, 6, 8), _randn(g, 2, 2, 6, 3)),
             {"mask": padding}, names=names),
        Case("causal mask broadcast over the batch",
             (_randn(g, 2, 5, 4), _randn(g, 2, 5, 4), _randn(g, 2, 5, 4)),
             {"mask": torch.ones(5, 5, dtype=torch.bool).tril()}, names=names),
        Case("a query row with no allowed key (fully masked)",
             (_randn(g, 4, 8), _randn(g, 5, 8), _randn(g, 5, 2)), {"mask": fully_masked},
             names=names),
        Case("d_k = 1", (_randn(g, 3, 1), _randn(g, 4, 1), _randn(g, 4, 2)), names=names),
    ]


def check_attention(fn: Callable) -> CheckResult:
    """Check ``fn(q, k, v, mask=None) -> (out, weights)``, scaled dot-product attention."""
    return _run_cases("check_attention", fn, _reference_attention, _attention_cases(),
                      _ATTENTION_HINT, compare=_compare_attention, diagnose=_diagnose_attention)


def _reference_attention(q, k, v, mask=None):
    out, weights = _ref().scaled_dot_product_attention(q, k, v, mask=mask)
    return out, weights


def _compare_attention(got: Any, expected: tuple) -> Optional[str]:
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return f"expected a tuple (out, weights), got {_type_name(got)}."
    return _compare(got[0], expected[0], "out") or _compare(got[1], expected[1], "weights")


def _diagnose_attention(case: Case, got: Any, expected: tuple) -> Optional[str]:
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return None
    q, k, v = case.args
    out, weights = got
    if (isinstance(out, torch.Tensor) and out.shape == expected[1].shape != expected[0].shape):
        return "the outputs look swapped: return (out, weights), the output first."
    if _same(got, _reference_attention(q * math.sqrt(q.shape[-1]), k, v, **case.kwargs)):
        return "the scores are not scaled: divide q @ k^T by sqrt(d_k)."
    mask = case.kwargs.get("mask")
    if mask is None:
        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool)
    mask = mask.expand(expected[1].shape)
    return _diagnose_weights(weights, expected[1], mask,
                             lambda m: _reference_attention(q, k, v, mask=m)[1])
