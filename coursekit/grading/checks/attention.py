"""References of the checks of chapter 5, "Scaled dot-product attention"."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..references import Case, Reference, lib, randn, register


def _t(k):
    return k.transpose(-2, -1)


# --------------------------------------------------------------------------------------
# Scaled dot-product scores
# --------------------------------------------------------------------------------------
register(
    "check_scaled_dot_score",
    Reference(
        seed=0,
        cases=lambda g: [
            Case("T_q != T_k", randn(g, 3, 4), randn(g, 5, 4)),
            Case("batch and head dims", randn(g, 2, 3, 4, 8), randn(g, 2, 3, 6, 8)),
            Case("d_k = 1", randn(g, 4, 1), randn(g, 6, 1)),
            Case("a single query", randn(g, 2, 1, 16), randn(g, 2, 7, 16)),
        ],
        solution=lib("attention.scaled_dot_score"),
        written=lambda q, k: q @ _t(k) / math.sqrt(q.shape[-1]),
        mistakes=[
            lambda q, k: q @ _t(k),
            lambda q, k: q @ _t(k) / q.shape[-1],
            lambda q, k: k @ _t(q) / math.sqrt(q.shape[-1]),
            lambda q, k: q @ k.permute(*range(k.dim() - 1, -1, -1)) / math.sqrt(q.shape[-1]),
        ],
        shortcuts=[
            lib("attention.scaled_dot_score"),
            lambda q, k: lib("attention.dot_score")(q, k) / math.sqrt(q.shape[-1]),
        ],
    ),
)


# --------------------------------------------------------------------------------------
# Masked softmax
# --------------------------------------------------------------------------------------
def _masked_softmax(scores, mask):
    w = torch.softmax(scores.masked_fill(~mask, -math.inf), dim=-1)
    return torch.nan_to_num(w, nan=0.0)


def _manual_softmax(scores, mask):  # exp without subtracting the max: overflows
    e = torch.exp(scores) * mask
    s = e.sum(-1, keepdim=True)
    return torch.where(s > 0, e / s, torch.zeros_like(e))


def _masked_softmax_cases(g):
    random_mask = torch.rand(4, 6, generator=g) > 0.4
    random_mask[:, 0] = True  # every row keeps at least one key
    padding = torch.ones(2, 1, 1, 5, dtype=torch.bool)
    padding[0, ..., 3:] = False  # first sequence: the last two keys are padding
    fully_masked = torch.ones(3, 4, dtype=torch.bool)
    fully_masked[1] = False  # query 1 may attend to nothing
    return [
        Case("random mask", randn(g, 4, 6), random_mask),
        Case("everything allowed", randn(g, 3, 5), torch.ones(3, 5, dtype=torch.bool)),
        Case("padding mask broadcast over heads and queries", randn(g, 2, 3, 4, 5), padding),
        Case(
            "causal (T, T) mask broadcast over the batch",
            randn(g, 2, 5, 5),
            torch.ones(5, 5, dtype=torch.bool).tril(),
        ),
        Case("a query row with no allowed key (fully masked)", randn(g, 3, 4), fully_masked),
        Case(
            "large scores (numerical stability)",
            randn(g, 3, 6, scale=500.0),
            torch.ones(3, 6, dtype=torch.bool),
        ),
    ]


register(
    "check_masked_softmax",
    Reference(
        seed=1,
        cases=_masked_softmax_cases,
        solution=lib("attention.masked_softmax"),
        written=_masked_softmax,
        mistakes=[
            lambda s, m: torch.softmax(s.masked_fill(~m, -math.inf), dim=-1),
            lambda s, m: _masked_softmax(s, ~m),
            lambda s, m: torch.nan_to_num(torch.softmax(s.masked_fill(~m, -math.inf), -2)),
            lambda s, m: torch.softmax(s.masked_fill(~m, -1e9), dim=-1),
            lambda s, m: torch.softmax(s, dim=-1),
            _manual_softmax,
        ],
        shortcuts=[
            lib("attention.masked_softmax"),
            lambda s, m: lib("attention.attend")(s, torch.zeros(*s.shape[:-2], s.shape[-1], 1), m)[1],
        ],
    ),
)


# --------------------------------------------------------------------------------------
# Causal mask
# --------------------------------------------------------------------------------------
def _ones(T):
    return torch.ones(T, T, dtype=torch.bool)


register(
    "check_causal_mask",
    Reference(
        cases=lambda g: [Case(f"T = {T}", T) for T in (5, 1, 2, 8)],
        hidden=lambda g: [Case(f"T = {T}", T) for T in (3, 7, 11)],
        solution=lib("attention.causal_mask"),
        written=lambda T: _ones(T).tril(),
        mistakes=[
            lambda T: _ones(T).triu(1),
            lambda T: _ones(T).triu(),
            lambda T: _ones(T).tril(-1),
            lambda T: torch.ones(T, T).tril(),
        ],
        shortcuts=[
            lib("attention.causal_mask"),
            lambda T: torch.nn.Transformer.generate_square_subsequent_mask(T) == 0,
        ],
    ),
)


# --------------------------------------------------------------------------------------
# Scaled dot-product attention
# --------------------------------------------------------------------------------------
def _attention(q, k, v, mask=None, scale=True, invert=False, nan=False, dim=-1):
    """Attention with the typical mistakes as switches."""
    scores = q @ _t(k) / (math.sqrt(q.shape[-1]) if scale else 1.0)
    allowed = torch.ones(scores.shape[-2:], dtype=torch.bool) if mask is None else mask
    allowed = ~allowed if invert else allowed
    w = torch.softmax(scores.masked_fill(~allowed, -math.inf), dim=dim)
    w = w if nan else torch.nan_to_num(w, nan=0.0)
    return w @ v, w


def _attention_cases(g):
    padding = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    padding[1, ..., 4:] = False
    fully_masked = torch.ones(4, 5, dtype=torch.bool)
    fully_masked[2] = False
    return [
        Case("no mask, T_q != T_k, d_v != d_k", randn(g, 3, 4), randn(g, 5, 4), randn(g, 5, 6)),
        Case(
            "batch and heads with a padding mask",
            randn(g, 2, 2, 4, 8),
            randn(g, 2, 2, 6, 8),
            randn(g, 2, 2, 6, 3),
            mask=padding,
        ),
        Case(
            "causal mask broadcast over the batch",
            randn(g, 2, 5, 4),
            randn(g, 2, 5, 4),
            randn(g, 2, 5, 4),
            mask=torch.ones(5, 5, dtype=torch.bool).tril(),
        ),
        Case(
            "a query row with no allowed key (fully masked)",
            randn(g, 4, 8),
            randn(g, 5, 8),
            randn(g, 5, 2),
            mask=fully_masked,
        ),
        Case("d_k = 1", randn(g, 3, 1), randn(g, 4, 1), randn(g, 4, 2)),
    ]


def _sdpa(q, k, v, mask=None):
    return tuple(lib("attention.scaled_dot_product_attention")(q, k, v, mask=mask))


def _torch_sdpa(q, k, v, mask=None):
    """torch's fused attention; its weights recomputed (it returns none)."""
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return torch.nan_to_num(out), _sdpa(q, k, v, mask)[1]


register(
    "check_attention",
    Reference(
        seed=2,
        cases=_attention_cases,
        solution=_sdpa,
        written=_attention,
        mistakes=[
            lambda q, k, v, mask=None: _attention(q, k, v, mask, scale=False),
            lambda q, k, v, mask=None: _attention(q, k, v, mask)[::-1],
            lambda q, k, v, mask=None: _attention(q, k, v, mask, invert=mask is not None),
            lambda q, k, v, mask=None: _attention(q, k, v, mask, nan=True),
            lambda q, k, v, mask=None: _attention(q, k, v),
            lambda q, k, v, mask=None: _attention(q, k, v, mask, dim=-2),
        ],
        shortcuts=[_sdpa, _torch_sdpa],
    ),
)


# --------------------------------------------------------------------------------------
# A padding mask from the lengths
# --------------------------------------------------------------------------------------
def _padding_mask(lengths, T, allowed=True, keys_only=True, inclusive=False):
    """(B, 1, 1, T) bool, True at the real positions; the typical mistakes as switches."""
    positions = torch.arange(T)  # (T,)
    real = positions <= lengths[:, None] if inclusive else positions < lengths[:, None]  # (B, T)
    real = real if allowed else ~real
    return real[:, None, None, :] if keys_only else real[:, None, :, None]


register(
    "check_padding_mask",
    Reference(
        cases=lambda g: [
            Case("lengths 5 and 3, T = 5", torch.tensor([5, 3]), 5),
            Case("three sequences, T longer than all of them", torch.tensor([1, 4, 2]), 6),
            Case("no padding at all", torch.tensor([3, 3]), 3),
        ],
        hidden=lambda g: [
            Case("random lengths, T = 7", torch.randint(1, 8, (4,), generator=g), 7),
            Case("one sequence, T = 2", torch.tensor([1]), 2),
        ],
        solution=lambda lengths, T: lib("attention.padding_mask")(lengths, T),
        written=_padding_mask,
        mistakes=[
            lambda lengths, T: _padding_mask(lengths, T, allowed=False),
            lambda lengths, T: _padding_mask(lengths, T, inclusive=True),
            lambda lengths, T: _padding_mask(lengths, T)[:, 0, 0],
            lambda lengths, T: _padding_mask(lengths, T, keys_only=False),
        ],
        shortcuts=[
            lambda lengths, T: lib("attention.padding_mask")(lengths, T),
            lambda lengths, T: lib("attention.padding_mask_from_tokens")(
                (torch.arange(T) < lengths[:, None]).long(), 0
            ),
        ],
    ),
)


# --------------------------------------------------------------------------------------
# The gradient that reaches the queries, by hand
# --------------------------------------------------------------------------------------
def _grad_q(q, k, v, grad_out, scale="sqrt", jacobian="full", last_scale=True):
    """dL/dq for L = sum(grad_out * out), out = softmax(q k^T / c) v, with the mistakes as switches.

    dL/dp = grad_out v^T,  dL/ds = p * (dL/dp - sum_j p_j dL/dp_j),  dL/dq = (dL/ds) k / c
    """
    c = {"sqrt": math.sqrt(q.shape[-1]), "none": 1.0, "d_k": float(q.shape[-1])}[scale]
    p = torch.softmax(q @ _t(k) / c, dim=-1)  # (..., T_q, T_k)
    dp = grad_out @ _t(v)  # (..., T_q, T_k)
    if jacobian == "full":
        ds = p * (dp - (p * dp).sum(-1, keepdim=True))
    elif jacobian == "diagonal":
        ds = p * dp
    else:
        ds = dp
    return ds @ k / (c if last_scale else 1.0)  # (..., T_q, d_k)


def _autograd_grad_q(q, k, v, grad_out):
    with torch.enable_grad():
        q = q.detach().clone().requires_grad_(True)
        out = lib("attention.scaled_dot_product_attention")(q, k, v)[0]
        (grad,) = torch.autograd.grad(out, q, grad_out)
    return grad


def _backward_grad_q(q, k, v, grad_out):
    torch.set_grad_enabled(True)
    q = q.detach().clone().requires_grad_(True)
    (lib("attention.scaled_dot_product_attention")(q, k, v)[0] * grad_out).sum().backward()
    return q.grad


register(
    "check_attention_grad_q",
    Reference(
        seed=5,
        cases=lambda g: [
            Case(
                "T_q = 3, T_k = 5, d_k = 4, d_v = 2",
                randn(g, 3, 4),
                randn(g, 5, 4),
                randn(g, 5, 2),
                randn(g, 3, 2),
            ),
            Case(
                "batch and heads, d_k = 8",
                randn(g, 2, 3, 4, 8),
                randn(g, 2, 3, 6, 8),
                randn(g, 2, 3, 6, 3),
                randn(g, 2, 3, 4, 3),
            ),
            Case(
                "large scores (a nearly saturated softmax)",
                randn(g, 2, 16, scale=3.0),
                randn(g, 7, 16, scale=3.0),
                randn(g, 7, 4),
                randn(g, 2, 4),
            ),
        ],
        solution=_autograd_grad_q,
        written=_grad_q,
        mistakes=[
            lambda q, k, v, g: _grad_q(q, k, v, g, scale="none"),
            lambda q, k, v, g: _grad_q(q, k, v, g, scale="d_k"),
            lambda q, k, v, g: _grad_q(q, k, v, g, jacobian="diagonal"),
            lambda q, k, v, g: _grad_q(q, k, v, g, jacobian="none"),
            lambda q, k, v, g: _grad_q(q, k, v, g, last_scale=False),
        ],
        shortcuts=[_autograd_grad_q, _backward_grad_q],
    ),
)
