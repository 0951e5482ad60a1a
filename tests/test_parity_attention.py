"""Parity of course_lib.attention.scaled_dot_product_attention with torch's.

For random shapes (no, one, two and three leading batch dims; T_q != T_k) and
every kind of mask, the outputs AND the gradients with respect to q, k and v
must match torch.nn.functional.scaled_dot_product_attention, and the returned
weights must equal softmax(q k^T / sqrt(d_k) + mask) computed by hand.
"""

import math
import zlib

import pytest
import torch
import torch.nn.functional as F

from course_lib.attention import causal_mask, padding_mask, scaled_dot_product_attention

BATCHES = [(), (3,), (2, 3), (2, 2, 3)]
MASKS = [
    "none",
    "bool",  # random, full shape (..., T_q, T_k), at least one allowed key per query
    "bool_2d",  # random (T_q, T_k), broadcast over the batch dims
    "causal",
    "padding",  # (B, 1, ..., 1, T_k) from lengths >= 1
    "causal_padding",
    "float",  # finite additive biases
    "float_inf",  # 0 / -inf plus finite biases, at least one finite entry per query
    "float_padding",  # padding as a float mask of shape (B, 1, ..., 1, T_k)
    "fully_masked",  # some queries may see no key: torch (>= 2.5) gives zeros there too
]
TOLERANCE = {torch.float64: dict(rtol=1e-10, atol=1e-10), torch.float32: dict(rtol=1e-5, atol=1e-5)}


def make_case(batch, mask_kind, dtype):
    """Random q, k, v and a mask of the given kind, seeded by the case's name."""
    g = torch.Generator().manual_seed(zlib.crc32(f"{batch}-{mask_kind}-{dtype}".encode()))
    T_q, T_k, d_k, d_v = (int(n) for n in torch.randint(1, 9, (4,), generator=g))
    if T_q == T_k:
        T_k += 1

    def randn(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype).requires_grad_()

    q, k, v = randn(*batch, T_q, d_k), randn(*batch, T_k, d_k), randn(*batch, T_k, d_v)
    return q, k, v, make_mask(mask_kind, batch, T_q, T_k, dtype, g)


def make_mask(kind, batch, T_q, T_k, dtype, g):
    def random_allowed(*shape):
        allowed = torch.rand(*shape, generator=g) < 0.5
        first = torch.randint(0, T_k, (*shape[:-1], 1), generator=g)
        return allowed.scatter(-1, first, True)  # at least one allowed key per query

    def padding():
        B = batch[0] if batch else 1
        lengths = torch.randint(1, T_k + 1, (B,), generator=g)
        mask = padding_mask(lengths, max_len=T_k)  # (B, 1, 1, T_k)
        if not batch:
            return mask[0, 0]  # (1, T_k)
        return mask.view(B, *[1] * len(batch), T_k)  # (B, 1, ..., 1, T_k)

    def as_float(allowed):
        return torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, -math.inf)

    full = (*batch, T_q, T_k)
    if kind == "none":
        return None
    if kind == "bool":
        return random_allowed(*full)
    if kind == "bool_2d":
        return random_allowed(T_q, T_k)
    if kind == "causal":
        return causal_mask(T_q, T_k)
    if kind == "padding":
        return padding()
    if kind == "causal_padding":
        return causal_mask(T_q, T_k) & padding()
    if kind == "float":
        return torch.randn(*full, generator=g, dtype=torch.float64).to(dtype)
    if kind == "float_inf":
        bias = torch.randn(*full, generator=g, dtype=torch.float64).to(dtype)
        return bias + as_float(random_allowed(*full))
    if kind == "float_padding":
        return as_float(padding())
    if kind == "fully_masked":
        allowed = random_allowed(*full)
        allowed[..., 0, :] = False  # query 0 sees nothing, in every batch element
        return allowed
    raise ValueError(kind)


def grads(out, inputs, seed=0):
    """Gradients of a random linear function of `out` w.r.t. `inputs`."""
    g = torch.Generator().manual_seed(seed)
    upstream = torch.randn(out.shape, generator=g, dtype=torch.float64).to(out.dtype)
    return torch.autograd.grad(out, inputs, upstream)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("mask_kind", MASKS)
@pytest.mark.parametrize("batch", BATCHES, ids=lambda b: f"batch{b}")
def test_sdpa_matches_torch(batch, mask_kind, dtype):
    q, k, v, mask = make_case(batch, mask_kind, dtype)

    ours, weights = scaled_dot_product_attention(q, k, v, mask)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    tol = TOLERANCE[dtype]
    assert ours.shape == theirs.shape
    assert not torch.isnan(ours).any()
    torch.testing.assert_close(ours, theirs, **tol)

    for name, g_ours, g_theirs in zip("qkv", grads(ours, (q, k, v)), grads(theirs, (q, k, v))):
        assert torch.isfinite(g_ours).all(), name
        torch.testing.assert_close(
            g_ours, g_theirs, **tol, msg=lambda m, name=name: f"grad w.r.t. {name}: {m}"
        )

    # the weights, by hand: softmax(q k^T / sqrt(d_k) + M), zero where a query sees no key
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None and mask.dtype == torch.bool:
        scores = scores.masked_fill(~mask, -math.inf)
    elif mask is not None:
        scores = scores + mask
    expected = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    torch.testing.assert_close(weights, expected, **tol)
    if mask_kind == "fully_masked":
        assert (weights[..., 0, :] == 0).all() and (ours[..., 0, :] == 0).all()
    else:
        torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1], dtype=dtype), **tol)


@pytest.mark.parametrize("T_q, T_k", [(5, 5), (3, 6), (6, 3)])
def test_causal_mask_matches_torch_is_causal(T_q, T_k):
    g = torch.Generator().manual_seed(T_q * 10 + T_k)
    q = torch.randn(2, 3, T_q, 4, generator=g, dtype=torch.float64)
    k = torch.randn(2, 3, T_k, 4, generator=g, dtype=torch.float64)
    v = torch.randn(2, 3, T_k, 2, generator=g, dtype=torch.float64)
    ours, _ = scaled_dot_product_attention(q, k, v, causal_mask(T_q, T_k))
    theirs = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(ours, theirs, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_sdpa_matches_torch_at_a_realistic_size(dtype):
    g = torch.Generator().manual_seed(1)
    q, k, v = (
        torch.randn(4, 8, 33, 64, generator=g, dtype=torch.float64).to(dtype).requires_grad_()
        for _ in range(3)
    )
    mask = causal_mask(33) & padding_mask(torch.tensor([33, 20, 7, 1]))
    ours, _ = scaled_dot_product_attention(q, k, v, mask)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(ours, theirs, **tol)
    for g_ours, g_theirs in zip(grads(ours, (q, k, v)), grads(theirs, (q, k, v))):
        torch.testing.assert_close(g_ours, g_theirs, **tol)
