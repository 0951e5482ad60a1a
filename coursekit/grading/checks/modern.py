"""References of the checks of chapter 12, "The modern decoder"."""

from __future__ import annotations

import math

import torch

from ..references import Case, Reference, load, randn, register


# --------------------------------------------------------------------------------------
# Grouped-query attention
# --------------------------------------------------------------------------------------
def grouped_attention(q, k, v, interleave=True, causal=True, scale=True, dim=-1):
    """softmax(q k_g(i)^T / sqrt(d_k) + causal mask) v_g(i), g(i) = i // (h / h_kv); the keywords
    are the typical mistakes. q (B, h, T, d_k), k and v (B, h_kv, T, d_k) -> (B, h, T, d_k)."""
    T, d_k = q.shape[-2:]
    group = q.shape[1] // k.shape[1]
    if interleave:  # heads 0 .. group-1 read kv head 0, the next group kv head 1, ...
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    else:  # the mistake: the stack of kv heads repeated, query head i reads kv head i % h_kv
        k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)
    scores = q @ k.transpose(-2, -1)  # (B, h, T, T)
    if scale:
        scores = scores / math.sqrt(d_k)
    if causal:
        scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), -math.inf)
    return torch.softmax(scores, dim=dim) @ v  # (B, h, T, d_k)


def _by_torch(q, k, v):
    """F.scaled_dot_product_attention groups the heads itself (enable_gqa): off limits."""
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def _by_course_attention(q, k, v):
    """The chapter 5 attention on the key/value heads repeated in place: off limits."""
    group, T = q.shape[1] // k.shape[1], q.shape[2]
    out, _ = load("attention.scaled_dot_product_attention")(
        q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1), mask=load("attention.causal_mask")(T)
    )
    return out


def by_llama(q, k, v):
    """course_lib.llama's Attention run on q, k, v (its projections and rotation bypassed): off
    limits. Only for an even d_k (RoPE's pairs), which its config checks."""
    B, h, T, d_k = q.shape
    config = load("llama.LlamaConfig")(vocab_size=1, n_head=h, n_kv_head=k.shape[1], n_embd=h * d_k)
    attention = load("llama.Attention")(config)
    attention.qkv = lambda x, start=0: (q, k, v)
    attention.o_proj = torch.nn.Identity()
    return attention(torch.zeros(B, T, h * d_k)).view(B, T, h, d_k).transpose(1, 2)


def _qkv(g, description, B, h, h_kv, T, d_k):
    return Case(description, randn(g, B, h, T, d_k), randn(g, B, h_kv, T, d_k), randn(g, B, h_kv, T, d_k))


register(
    "check_grouped_attention",
    Reference(
        seed=41,
        cases=lambda g: [  # the first tells every typical mistake from the others
            _qkv(g, "4 query heads in 2 groups (h_kv = 2), T = 5", 2, 4, 2, 5, 8),
            _qkv(g, "6 query heads in 2 groups of 3, T = 7", 1, 6, 2, 7, 4),
            _qkv(g, "multi-query: h_kv = 1 for 4 query heads, T = 6", 2, 4, 1, 6, 6),
            _qkv(g, "multi-head: h_kv = h = 3, T = 5, d_k = 5", 2, 3, 3, 5, 5),
            _qkv(g, "8 query heads in 4 groups of 2, T = 9", 1, 8, 4, 9, 4),
            _qkv(g, "one token, 4 query heads in 2 groups", 3, 4, 2, 1, 2),
        ],
        hidden=lambda g: [
            _qkv(g, "6 query heads in 3 groups of 2, T = 4", 2, 6, 3, 4, 6),
            _qkv(g, "multi-query: h_kv = 1 for 3 query heads, T = 7", 1, 3, 1, 7, 4),
            _qkv(g, "multi-head: h_kv = h = 2, T = 3", 3, 2, 2, 3, 8),
            _qkv(g, "8 query heads in 2 groups of 4, T = 5", 1, 8, 2, 5, 2),
        ],
        solution=grouped_attention,
        mistakes=[
            lambda q, k, v: grouped_attention(q, k, v, interleave=False),
            lambda q, k, v: grouped_attention(q, k, v, causal=False),
            lambda q, k, v: grouped_attention(q, k, v, scale=False),
            lambda q, k, v: grouped_attention(q, k, v, dim=-2),
        ],
        shortcuts=[_by_torch, _by_course_attention, by_llama],
    ),
)


# --------------------------------------------------------------------------------------
# The bytes of a grouped key/value cache
# --------------------------------------------------------------------------------------
def cache_bytes(n_layer, n_head, n_kv_head, d_k, tokens, bytes_per_number):
    """2 (keys and values) x n_layer x n_kv_head x d_k numbers per token, n_head unused."""
    return 2 * n_layer * n_kv_head * d_k * tokens * bytes_per_number


DTYPES = {2: torch.bfloat16, 4: torch.float32, 8: torch.float64}


def measurable(n_layer, n_head, n_kv_head, d_k, tokens, bytes_per_number):
    """Whether a Llama of these sizes is small enough to build and fill here."""
    return bytes_per_number in DTYPES and d_k % 2 == 0 and n_head * d_k <= 512 and tokens <= 16384


def filled_cache_bytes(n_layer, n_head, n_kv_head, d_k, tokens, bytes_per_number):
    """The bytes that the KVCaches of a course_lib.llama.Llama of these sizes (a vocabulary of 2,
    numbers of `bytes_per_number` bytes) hold after reading `tokens` tokens, in sequences of at
    most 256: the sum of the sizes of the tensors, as the sweep modern_gqa_cache measures."""
    length = max(n for n in range(1, min(tokens, 256) + 1) if tokens % n == 0)
    config = load("llama.LlamaConfig")(
        vocab_size=2, block_size=length, n_layer=n_layer, n_head=n_head, n_kv_head=n_kv_head,
        n_embd=n_head * d_k, ffn_hidden=8,
    )  # fmt: skip
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(0)
        model = load("llama.Llama")(config).to(DTYPES[bytes_per_number]).eval()
        caches = [load("multihead.KVCache")() for _ in range(n_layer)]
        model(torch.zeros(tokens // length, length, dtype=torch.long), caches)
    return sum(c.k.numel() * c.k.element_size() + c.v.numel() * c.v.element_size() for c in caches)


def _measured(*sizes):
    """The reference: measured on filled caches where a Llama of these sizes can be built here;
    otherwise (Llama 3 8B's shape) counted, by the count the measured cases confirm
    (tests/test_exercises_modern.py)."""
    return filled_cache_bytes(*sizes) if measurable(*sizes) else cache_bytes(*sizes)


def _random_config(g, what):
    pick = lambda options: options[int(torch.randint(len(options), (1,), generator=g))]  # noqa: E731
    n_kv_head, group = pick([1, 2, 3]), pick([2, 3, 4])
    n_layer, d_k, tokens, size = pick([3, 5, 6]), pick([4, 6, 8]), pick([9, 50, 96, 130]), pick([2, 4, 8])
    sizes = (n_layer, n_kv_head * group, n_kv_head, d_k, tokens, size)
    return Case(f"{what}: n_layer, n_head, n_kv_head, d_k, tokens, bytes = {sizes}", *sizes)


register(
    "check_gqa_cache_bytes",
    Reference(
        cases=lambda g: [  # the first tells every typical mistake from the others
            Case("3 blocks, 6 query heads, 2 key/value heads of 4, 7 tokens, float32", 3, 6, 2, 4, 7, 4),
            Case("the chapter's Llama, 1 key/value head, 8 sequences of 1024, float32", 4, 4, 1, 32, 8192, 4),
            Case("the same with 4 key/value heads (full multi-head attention)", 4, 4, 4, 32, 8192, 4),
            Case("Llama 3 8B's shape, one sequence of 8192 tokens, bfloat16", 32, 32, 8, 128, 8192, 2),
            Case("one token, float64", 2, 2, 1, 6, 1, 8),
            _random_config(g, "a decoder drawn for this edition"),
        ],
        hidden=lambda g: [_random_config(g, "a hidden decoder") for _ in range(3)],
        solution=_measured,
        mistakes=[
            lambda L, h, h_kv, d_k, n, b: cache_bytes(L, h, h_kv, d_k, n, b) // 2,
            lambda L, h, h_kv, d_k, n, b: cache_bytes(L, h, h, d_k, n, b),
            lambda L, h, h_kv, d_k, n, b: cache_bytes(1, h, h_kv, d_k, n, b),
            lambda L, h, h_kv, d_k, n, b: 8 * cache_bytes(L, h, h_kv, d_k, n, b),
        ],
        shortcuts=[],
    ),
)
