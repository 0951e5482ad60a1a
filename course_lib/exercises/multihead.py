"""Checks for the chapters "Self-attention" and "Multi-head attention and masks"."""

from __future__ import annotations

import math
from typing import Any, Callable, Optional

import torch

from ._engine import Case, CheckResult, ExerciseFailure, _compare, _randn, _run_cases, _same, _type_name


def _attention():
    from course_lib import attention  # imported lazily: the checks only need it when run

    return attention


def _multihead():
    from course_lib import multihead

    return multihead


def _compare_pair(got: Any, expected: tuple) -> Optional[str]:
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return f"expected a tuple (out, weights), got {_type_name(got)}."
    return _compare(got[0], expected[0], "out") or _compare(got[1], expected[1], "weights")


# --------------------------------------------------------------------------------------
# Self-attention from projection matrices
# --------------------------------------------------------------------------------------
_SELF_HINT = ("Q = x @ W_q, K = x @ W_k, V = x @ W_v (all from the same x); then "
              "softmax(Q K^T / sqrt(d_k)) over the keys, and out = weights @ V. Return (out, weights).")


def _reference_self_attention(x, w_q, w_k, w_v):
    return _attention().scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v)


def check_self_attention(fn: Callable) -> CheckResult:
    """Check ``fn(x, w_q, w_k, w_v) -> (out, weights)``: one head of self-attention."""
    g = torch.Generator().manual_seed(10)
    names = ("x", "w_q", "w_k", "w_v")
    cases = [
        Case("one sequence, d_k = d_v = d_model", (_randn(g, 5, 8), _randn(g, 8, 8), _randn(g, 8, 8),
                                                   _randn(g, 8, 8)), names=names),
        Case("a batch, d_k != d_v", (_randn(g, 2, 6, 8), _randn(g, 8, 4), _randn(g, 8, 4),
                                     _randn(g, 8, 3)), names=names),
        Case("a single token", (_randn(g, 3, 1, 4), _randn(g, 4, 2), _randn(g, 4, 2),
                                _randn(g, 4, 4)), names=names),
    ]
    return _run_cases("check_self_attention", fn, _reference_self_attention, cases, _SELF_HINT,
                      compare=_compare_pair, diagnose=_diagnose_self_attention)


def _diagnose_self_attention(case: Case, got: Any, expected: tuple) -> Optional[str]:
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return None
    x, w_q, w_k, w_v = case.args
    A = _attention()
    if _same(got, A.scaled_dot_product_attention(x @ w_q * math.sqrt(w_q.shape[1]), x @ w_k, x @ w_v)):
        return "the scores are not scaled: divide Q K^T by sqrt(d_k), with d_k = W_q.shape[1]."
    if w_v.shape[0] == w_v.shape[1] and _same(got, A.scaled_dot_product_attention(x @ w_q, x @ w_k, x)):
        return "the values are x itself: project them with W_v too."
    if _same(got, A.scaled_dot_product_attention(x @ w_q, x @ w_q, x @ w_v)):
        return "the keys use W_q: keys are x @ W_k."
    if w_q.shape[0] == w_q.shape[1] and _same(got, A.scaled_dot_product_attention(
            x @ w_q.T, x @ w_k.T, x @ w_v.T)):
        return "the projections are transposed: with W of shape (d_model, d_k), write x @ W."
    return None


# --------------------------------------------------------------------------------------
# Cross-attention
# --------------------------------------------------------------------------------------
_CROSS_HINT = ("queries come from the decoder: Q = y @ W_q; keys and values from the encoder: "
               "K = x @ W_k, V = x @ W_v. The weights are (T_y, T_x): one row per decoder position.")


def _reference_cross(y, x, w_q, w_k, w_v):
    return _attention().scaled_dot_product_attention(y @ w_q, x @ w_k, x @ w_v)


def check_cross_attention(fn: Callable) -> CheckResult:
    """Check ``fn(y, x, w_q, w_k, w_v) -> (out, weights)``: decoder y attends to encoder x."""
    g = torch.Generator().manual_seed(11)
    names = ("y", "x", "w_q", "w_k", "w_v")
    cases = [
        Case("T_y = 3 decoder positions, T_x = 5 encoder positions",
             (_randn(g, 3, 8), _randn(g, 5, 8), _randn(g, 8, 8), _randn(g, 8, 8), _randn(g, 8, 8)),
             names=names),
        Case("a batch, T_y > T_x", (_randn(g, 2, 7, 6), _randn(g, 2, 4, 6), _randn(g, 6, 4),
                                    _randn(g, 6, 4), _randn(g, 6, 5)), names=names),
    ]
    return _run_cases("check_cross_attention", fn, _reference_cross, cases, _CROSS_HINT,
                      compare=_compare_pair, diagnose=_diagnose_cross)


def _diagnose_cross(case: Case, got: Any, expected: tuple) -> Optional[str]:
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return None
    y, x, w_q, w_k, w_v = case.args
    flipped = expected[1].transpose(-2, -1).shape
    if isinstance(got[1], torch.Tensor) and got[1].shape == flipped != expected[1].shape:
        return "the roles are swapped: the decoder (y) asks the queries, the encoder (x) answers."
    if _same(got, _reference_cross(y, y, w_q, w_k, w_v)):
        return "this is self-attention on y: keys and values must come from the encoder x."
    return None


# --------------------------------------------------------------------------------------
# Cost of self-attention
# --------------------------------------------------------------------------------------
_FLOPS_HINT = ("count multiply-adds: three projections (n, d) @ (d, d) cost n*d*d each; the scores "
               "Q K^T cost n*n*d; the weighted sum weights @ V costs n*n*d.")


def _reference_flops(n, d):
    return 3 * n * d * d + 2 * n * n * d


def check_attention_flops(fn: Callable) -> CheckResult:
    """Check ``fn(n, d) -> int``: multiply-adds of one head of self-attention (d_k = d_v = d)."""
    cases = [Case(f"n = {n}, d = {d}", (n, d), names=("n", "d"))
             for n, d in [(4, 2), (128, 64), (1, 8), (1024, 64)]]

    def compare(got, expected):
        if isinstance(got, torch.Tensor):
            got = got.item()
        if not isinstance(got, (int, float)) or got != expected:
            return f"expected {expected} multiply-adds, got {got!r}."
        return None

    def diagnose(case, got, expected):
        n, d = case.args
        if got == 2 * n * n * d:
            return "the projections to Q, K and V are missing (3 n d^2)."
        if got == 3 * n * d * d + n * n * d:
            return "only one of the two n x n products is counted: scores AND weights @ V."
        if got == 3 * n * d * d:
            return "the n x n products (the scores and the weighted sum) are missing."
        return None

    return _run_cases("check_attention_flops", fn, _reference_flops, cases, _FLOPS_HINT,
                      compare=compare, diagnose=diagnose)


# --------------------------------------------------------------------------------------
# Splitting and merging heads
# --------------------------------------------------------------------------------------
_SPLIT_HINT = ("view (B, T, d_model) as (B, T, h, d_k) with d_k = d_model // h, then swap dims "
               "1 and 2: head i gets the features i*d_k ... (i+1)*d_k - 1.")
_MERGE_HINT = "swap dims 1 and 2 back, (B, h, T, d_k) -> (B, T, h, d_k), then reshape to (B, T, h*d_k)."


def check_split_heads(fn: Callable) -> CheckResult:
    """Check ``fn(x, num_heads) -> (B, h, T, d_k)``."""
    g = torch.Generator().manual_seed(12)
    cases = [Case(f"h = {h}", (_randn(g, B, T, d), h), names=("x", "num_heads"))
             for B, T, d, h in [(2, 3, 8, 2), (1, 5, 12, 4), (3, 4, 6, 1), (2, 2, 8, 8)]]

    def diagnose(case, got, expected):
        x, h = case.args
        B, T, d = x.shape
        if _same(got, x.view(B, T, d // h, h).permute(0, 3, 1, 2)):
            return ("heads take every h-th feature: view as (B, T, h, d_k), not (B, T, d_k, h), "
                    "so each head gets a contiguous block of features.")
        if isinstance(got, torch.Tensor) and got.shape == (B, h, T, d // h) and \
                _same(got, x.reshape(B, h, T, d // h)):
            return ("reshape alone mixes positions into heads: first view (B, T, h, d_k), "
                    "then transpose(1, 2).")
        return None

    return _run_cases("check_split_heads", fn, lambda x, h: _multihead().split_heads(x, h),
                      cases, _SPLIT_HINT, diagnose=diagnose)


def check_merge_heads(fn: Callable) -> CheckResult:
    """Check ``fn(x) -> (B, T, h * d_k)`` for x of shape (B, h, T, d_k)."""
    g = torch.Generator().manual_seed(13)
    cases = [Case(f"h = {h}", (_randn(g, B, h, T, d_k),), names=("x",))
             for B, h, T, d_k in [(2, 2, 3, 4), (1, 4, 5, 3), (3, 1, 4, 6)]]

    def diagnose(case, got, expected):
        (x,) = case.args
        B, h, T, d_k = x.shape
        if h > 1 and _same(got, x.reshape(B, T, h * d_k)):
            return "reshape alone mixes heads and positions: transpose(1, 2) first."
        return None

    return _run_cases("check_merge_heads", fn, lambda x: _multihead().merge_heads(x),
                      cases, _MERGE_HINT, diagnose=diagnose)


# --------------------------------------------------------------------------------------
# Masks in nn.MultiheadAttention's convention
# --------------------------------------------------------------------------------------
_KPM_HINT = ("nn.MultiheadAttention's key_padding_mask is (B, T) bool with True where the key is "
             "PADDING (blocked): True for j >= lengths[b].")


def _reference_key_padding_mask(lengths, T):
    return ~_attention().padding_mask(lengths, T)[:, 0, 0, :]


def check_key_padding_mask(fn: Callable) -> CheckResult:
    """Check ``fn(lengths, T) -> (B, T)`` bool, True = padding (nn.MultiheadAttention's convention)."""
    cases = [Case(f"lengths = {ls}, T = {T}", (torch.tensor(ls), T), names=("lengths", "T"))
             for ls, T in [([3, 1, 2], 3), ([5, 2], 6), ([1], 1), ([4, 4, 2, 3], 4)]]

    def diagnose(case, got, expected):
        if not isinstance(got, torch.Tensor):
            return None
        if got.shape != expected.shape and got.numel() == expected.numel():
            return "the shape must be (B, T) for nn.MultiheadAttention, not course_lib's (B, 1, 1, T)."
        if got.shape == expected.shape and bool(((got != 0) == ~expected).all()):
            return ("the polarity is inverted: this is course_lib's / F.scaled_dot_product_attention's "
                    "convention (True = allowed); nn.MultiheadAttention wants True = blocked.")
        if got.shape == expected.shape and got.dtype != torch.bool:
            return "key_padding_mask must be a bool tensor (a float one is ADDED to the scores)."
        return None

    return _run_cases("check_key_padding_mask", fn, _reference_key_padding_mask, cases, _KPM_HINT,
                      diagnose=diagnose)


# --------------------------------------------------------------------------------------
# Multi-head attention forward pass
# --------------------------------------------------------------------------------------
_MHA_HINT = ("project with in_proj_weight (its three row blocks are W_q, W_k, W_v) and in_proj_bias, "
             "split into h heads of d_k = d_model // h, scaled dot-product attention per head (divide "
             "by sqrt(d_k)), merge the heads and apply out_proj. Return (out, per-head weights).")


def check_multihead_forward(fn: Callable) -> CheckResult:
    """Check ``fn(x, mha, mask=None) -> (out (B, T, d), weights (B, h, T, T))`` against ``mha``."""
    MHA = _multihead().MultiHeadAttention
    A = _attention()
    cases = []
    for i, (B, T, d, h, mask) in enumerate([(2, 4, 8, 2, None), (1, 5, 12, 3, A.causal_mask(5)),
                                            (3, 3, 16, 4, A.padding_mask(torch.tensor([3, 1, 2]))),
                                            (2, 3, 4, 1, None)]):
        torch.manual_seed(20 + i)
        mha = MHA(d, h).eval()
        with torch.no_grad():
            mha.in_proj_bias.normal_()
        x = torch.randn(B, T, d)
        desc = f"d_model = {d}, h = {h}" + ("" if mask is None else f", mask {tuple(mask.shape)}")
        cases.append(Case(desc, (x, mha), {} if mask is None else {"mask": mask}, names=("x", "mha")))

    def reference(x, mha, mask=None):
        with torch.no_grad():
            return mha(x, x, x, mask=mask)

    def call(x, mha, mask=None):
        with torch.no_grad():
            return fn(x, mha) if mask is None else fn(x, mha, mask=mask)

    def diagnose(case, got, expected):
        if not isinstance(got, (tuple, list)) or len(got) != 2 or not isinstance(got[1], torch.Tensor):
            return None
        x, mha = case.args
        if got[1].dim() == 3 and expected[1].dim() == 4:
            return "the weights have no head dim: return them per head, (B, h, T, T), not averaged."
        with torch.no_grad():
            q, k, v = mha.project(x, x, x)
            wrong = A.scaled_dot_product_attention(q * math.sqrt(mha.d_k) / math.sqrt(mha.d_model), k, v,
                                                   mask=case.kwargs.get("mask"))[1]
        if mha.num_heads > 1 and _same(got[1], wrong):
            return "the scores are divided by sqrt(d_model); each head divides by sqrt(d_k)."
        return None

    if not callable(fn):
        raise ExerciseFailure("check_multihead_forward expects a function, e.g. "
                              "check_multihead_forward(my_multihead_attention).")
    call.__wrapped__ = fn
    return _run_cases("check_multihead_forward", call, reference, cases, _MHA_HINT,
                      compare=_compare_pair, diagnose=diagnose)
