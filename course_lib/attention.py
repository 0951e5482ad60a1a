"""Attention, from score functions to scaled dot-product attention.

Every attention mechanism in this course has the same three steps:

    1. score   each query against each key:     scores  = score(q, k)          # (..., T_q, T_k)
    2. softmax the scores over the keys:        weights = softmax(scores)      # (..., T_q, T_k)
    3. average the values with those weights:   context = weights @ v          # (..., T_q, d_v)

Only step 1 changes from paper to paper (dot, scaled dot, cosine, Luong's
"general" and "location", Bahdanau's additive/"concat"), so the score functions
come first, then `masked_softmax` and `attend` (steps 2 and 3), then
`scaled_dot_product_attention`, the Transformer's version, and the masks.

Shapes: queries are (..., T_q, d), keys (..., T_k, d), values (..., T_k, d_v),
where "..." is any number of leading batch dimensions (none, (B,), (B, h), ...)
that broadcast against each other.

Input checks: each public function checks its inputs once and names the argument
that is wrong. Inside, the library's models (multi-head attention, the Transformer,
the seq2seq decoders) check their own inputs once where a learner calls in and run
the unchecked `_masked_softmax`, the same arithmetic as `masked_softmax`.

Mask convention (the same as torch.nn.functional.scaled_dot_product_attention):
a boolean mask is True where attention is ALLOWED; a float mask is ADDED to the
scores (0 = allowed, -inf = blocked). A mask broadcasts to the scores' shape
(..., T_q, T_k). A query that may attend to no key at all gets zero weights and
a zero output row, never NaN.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._checks import (check_attention_tensor, check_int, check_location_inputs, check_mask,
                      check_mask_lengths, check_query_key, check_query_key_value, check_score_inputs,
                      check_scores_values, shape_of)

__all__ = [
    "dot_score",
    "scaled_dot_score",
    "cosine_score",
    "GeneralScore",
    "AdditiveScore",
    "LocationScore",
    "CosineScore",
    "SCORES",
    "make_score",
    "masked_softmax",
    "attend",
    "scaled_dot_product_attention",
    "causal_mask",
    "padding_mask",
    "padding_mask_from_tokens",
]


# ---------------------------------------------------------------------------
# 1. Score functions: how well does query i match key j?
# ---------------------------------------------------------------------------

def dot_score(q, k):
    """Dot-product score (Luong "dot"): score(q_i, k_j) = q_i . k_j, i.e. q k^T.

    q: (..., T_q, d), k: (..., T_k, d)  ->  scores: (..., T_q, T_k)
    """
    check_query_key(q, k)
    return q @ k.transpose(-2, -1)  # (..., T_q, d) @ (..., d, T_k) -> (..., T_q, T_k)


def scaled_dot_score(q, k):
    """Scaled dot-product score (Vaswani et al., 2017): q k^T / sqrt(d_k).

    Dividing by sqrt(d_k) keeps the scores' variance near 1 when the entries of
    q and k have variance 1, so the softmax does not saturate as d_k grows.

    q: (..., T_q, d_k), k: (..., T_k, d_k)  ->  scores: (..., T_q, T_k)
    """
    check_query_key(q, k)
    d_k = q.shape[-1]
    # (q / sqrt(d_k)) k^T: the same numbers as dot_score(q, k) / sqrt(d_k), but
    # dividing the (T_q, d_k) queries is cheaper than dividing the (T_q, T_k) scores.
    return (q / math.sqrt(d_k)) @ k.transpose(-2, -1)  # (..., T_q, T_k)


def cosine_score(q, k, scale=1.0, eps=1e-8):
    """Cosine score: scale * cos(q_i, k_j) = scale * (q_i . k_j) / (|q_i| |k_j|).

    The scores lie in [-scale, scale] whatever the vectors' lengths; `scale`
    (a temperature) sets how peaked the softmax can get. Each vector is divided
    by max(|x|, eps), so a zero query or key scores 0 against everything
    instead of producing NaN.

    q: (..., T_q, d), k: (..., T_k, d)  ->  scores: (..., T_q, T_k)
    """
    check_query_key(q, k)
    q_unit = F.normalize(q, dim=-1, eps=eps)  # (..., T_q, d), rows of length 1 (or 0)
    k_unit = F.normalize(k, dim=-1, eps=eps)  # (..., T_k, d)
    return scale * (q_unit @ k_unit.transpose(-2, -1))  # (..., T_q, T_k)


class _Score(nn.Module):
    """What the score modules share: check_inputs=False skips the checks of q and k (the seq2seq
    decoders build theirs so: a model checks its inputs once, where a learner calls in, and then
    scores at every step; called as a module, a score can still be hooked or swapped)."""

    def __init__(self, check_inputs=True):
        super().__init__()
        self.check_inputs = check_inputs


class GeneralScore(_Score):
    """Luong's "general" score: score(q_i, k_j) = q_i^T W k_j, i.e. q W k^T.

    A learned bilinear form; it lets queries and keys live in different spaces
    (d_q != d_k). `self.W.weight` is the matrix W, of shape (d_q, d_k).

    forward(q, k): q (..., T_q, d_q), k (..., T_k, d_k)  ->  scores (..., T_q, T_k)
    """

    def __init__(self, d_q, d_k, check_inputs=True):
        super().__init__(check_inputs)
        self.d_q, self.d_k = d_q, d_k
        self.W = nn.Linear(d_k, d_q, bias=False)  # k -> W k

    def forward(self, q, k):
        if self.check_inputs:
            check_score_inputs(q, k, self.d_q, self.d_k)
        return q @ self.W(k).transpose(-2, -1)  # q . (W k): (..., T_q, T_k)


class AdditiveScore(_Score):
    """Bahdanau's additive score (Luong's "concat"): v^T tanh(W_q q_i + W_k k_j).

    A one-hidden-layer network of width d_hidden scores every (query, key) pair.

    forward(q, k): q (..., T_q, d_q), k (..., T_k, d_k)  ->  scores (..., T_q, T_k)
    """

    def __init__(self, d_q, d_k, d_hidden, check_inputs=True):
        super().__init__(check_inputs)
        self.d_q, self.d_k = d_q, d_k
        self.W_q = nn.Linear(d_q, d_hidden, bias=False)
        self.W_k = nn.Linear(d_k, d_hidden, bias=False)
        self.v = nn.Linear(d_hidden, 1, bias=False)

    def forward(self, q, k):
        if self.check_inputs:
            check_score_inputs(q, k, self.d_q, self.d_k)
        q_h = self.W_q(q).unsqueeze(-2)  # (..., T_q, 1, d_hidden)
        k_h = self.W_k(k).unsqueeze(-3)  # (..., 1, T_k, d_hidden)
        hidden = torch.tanh(q_h + k_h)  # (..., T_q, T_k, d_hidden)
        return self.v(hidden).squeeze(-1)  # (..., T_q, T_k)


class LocationScore(_Score):
    """Luong's "location" score: scores = W q_i, from the query alone.

    Luong et al. (2015) define a_t = softmax(W_a h_t): the decoder state decides
    *which positions* to look at without ever looking at the keys' contents.
    Row i of the result scores positions 0..T_k-1 for query i; `attend`
    applies the softmax. The module is built for at most `T_k` positions; when
    keys are given, the scores are cut to their length (the keys' contents are
    not used).

    forward(q, k=None): q (..., T_q, d_q), k (..., T, d) with T <= T_k
        ->  scores (..., T_q, T), or (..., T_q, T_k) when k is None
    """

    def __init__(self, d_q, T_k, check_inputs=True):
        super().__init__(check_inputs)
        self.d_q, self.T_k = d_q, T_k
        self.W = nn.Linear(d_q, T_k, bias=False)  # q -> W q

    def forward(self, q, k=None):
        if self.check_inputs:
            check_location_inputs(q, k, self.d_q, self.T_k)
        scores = self.W(q)  # (..., T_q, T_k)
        if k is None:
            return scores
        return scores[..., : k.shape[-2]]  # (..., T_q, T) for keys of length T


class CosineScore(_Score):
    """Cosine score with a learned temperature: exp(log_scale) * cos(q_i, k_j).

    The cosine alone lies in [-1, 1], too flat for a sharp softmax; the learned
    scale (initially `scale`) lets the model sharpen it. The arithmetic of `cosine_score`.
    """

    def __init__(self, scale=5.0, check_inputs=True):
        super().__init__(check_inputs)
        self.log_scale = nn.Parameter(torch.tensor(float(scale)).log())

    def forward(self, q, k):
        if self.check_inputs:
            check_query_key(q, k)
        q_unit, k_unit = F.normalize(q, dim=-1, eps=1e-8), F.normalize(k, dim=-1, eps=1e-8)
        return self.log_scale.exp() * (q_unit @ k_unit.transpose(-2, -1))  # (..., T_q, T_k)


class _DotScore(_Score):
    """`dot_score` (q k^T) or `scaled_dot_score` (q k^T / sqrt(d_k)) as a module."""

    def __init__(self, scaled, check_inputs=True):
        super().__init__(check_inputs)
        self.scaled = scaled

    def forward(self, q, k):
        if self.check_inputs:
            check_query_key(q, k)
        if self.scaled:
            q = q / math.sqrt(q.shape[-1])  # as scaled_dot_score: the queries are divided
        return q @ k.transpose(-2, -1)  # (..., T_q, T_k)

    def extra_repr(self):
        return "scaled_dot_score" if self.scaled else "dot_score"


SCORES = ("dot", "scaled_dot", "general", "concat", "location", "cosine")
"""Score names accepted by `make_score` ("additive" is a synonym of "concat")."""


def make_score(name, d_q, d_k, d_hidden=None, max_src_len=None, check_inputs=True):
    """The score module called `name` (one of SCORES), for queries of width d_q and keys d_k
    (check_inputs=False: its forward does not check q and k; see `_Score`).

        dot         q . k                      (needs d_q == d_k)
        scaled_dot  q . k / sqrt(d_k)          (needs d_q == d_k)
        general     q^T W k                    Luong
        concat      v^T tanh(W_q q + W_k k)    Bahdanau's additive score (width d_hidden)
        location    W q, from the query alone  Luong (needs max_src_len)
        cosine      scale * cos(q, k)          with a learned scale (needs d_q == d_k)
    """
    name = "concat" if name == "additive" else name
    if name not in SCORES:
        raise ValueError(f"unknown score {name!r}; known: {list(SCORES)} (or 'additive')")
    if name in ("dot", "scaled_dot", "cosine") and d_q != d_k:
        raise ValueError(f"score {name!r} compares queries and keys directly, so d_q must equal "
                         f"d_k; got d_q={d_q}, d_k={d_k} (use 'general' or 'concat')")
    if name in ("dot", "scaled_dot"):
        return _DotScore(scaled=name == "scaled_dot", check_inputs=check_inputs)
    if name == "cosine":
        return CosineScore(check_inputs=check_inputs)
    if name == "general":
        return GeneralScore(d_q, d_k, check_inputs)
    if name == "concat":
        return AdditiveScore(d_q, d_k, d_hidden or d_q, check_inputs)
    if max_src_len is None:
        raise ValueError("score 'location' scores positions 0..max_src_len-1: pass max_src_len")
    return LocationScore(d_q, max_src_len, check_inputs)


# ---------------------------------------------------------------------------
# 2. Softmax with a mask, and the weighted average of the values
# ---------------------------------------------------------------------------

def masked_softmax(scores, mask=None):
    """Softmax over the keys (last dim), skipping the masked-out keys.

        weights_ij = exp(s_ij + m_ij) / sum_j' exp(s_ij' + m_ij')

    where m_ij = 0 for an allowed key and -inf for a blocked one. `mask` is
    either bool (True = allowed) or float (added to the scores as is, so it may
    also hold finite biases; it is cast to the scores' dtype). It broadcasts
    to the scores' shape (without adding dims). A row with no allowed
    key (all -inf) gets all-zero weights instead of 0/0 = NaN, and zero
    gradients.

    scores: (..., T_q, T_k), mask: broadcastable to (..., T_q, T_k)  ->  weights: (..., T_q, T_k)
    """
    check_attention_tensor("scores", scores)
    check_mask("mask", mask, scores.shape)
    return _masked_softmax(scores, mask)


def _masked_softmax(scores, mask=None):
    """`masked_softmax` without the input checks (its callers have checked their inputs).

        weights_ij = exp(s_ij + m_ij) / sum_j' exp(s_ij' + m_ij'),  m_ij = 0 (allowed) or -inf
    """
    if mask is None:
        return torch.softmax(scores, dim=-1)  # (..., T_q, T_k)
    if mask.dtype == torch.bool:  # True = allowed -> 0, False = blocked -> -inf
        zeros = torch.zeros(mask.shape, dtype=scores.dtype, device=scores.device)
        mask = zeros.masked_fill(~mask, -math.inf)
    else:
        mask = mask.to(scores.dtype)  # a float mask is added as is
    has_key = (mask > -math.inf).any(dim=-1, keepdim=True)  # (..., T_q, 1): any allowed key?
    scores = (scores + mask).masked_fill(~has_key, 0.0)  # empty rows: avoid softmax(-inf, ..., -inf)
    weights = torch.softmax(scores, dim=-1)  # (..., T_q, T_k)
    return weights.masked_fill(~has_key, 0.0)  # empty rows -> all-zero weights


def attend(scores, values, mask=None):
    """Turn scores into weights and average the values: step 2 and 3 of attention.

        weights = masked_softmax(scores, mask)
        context = weights @ values,  i.e. context_i = sum_j weights_ij v_j

    scores: (..., T_q, T_k), values: (..., T_k, d_v), mask: broadcastable to scores
        ->  context: (..., T_q, d_v), weights: (..., T_q, T_k)
    """
    check_scores_values(scores, values)
    check_mask("mask", mask, scores.shape)
    weights = _masked_softmax(scores, mask)  # (..., T_q, T_k)
    context = weights @ values  # (..., T_q, T_k) @ (..., T_k, d_v) -> (..., T_q, d_v)
    return context, weights


def scaled_dot_product_attention(q, k, v, mask=None):
    """Scaled dot-product attention (Vaswani et al., 2017):

        Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + M) V

    `mask` is bool (True = allowed, i.e. M = 0 there and -inf elsewhere) or
    float (M itself, added to the scores). It broadcasts to (..., T_q, T_k).
    A query with no allowed key gets a zero output row and zero weights.
    Matches torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask),
    and also returns the attention weights.

    q: (..., T_q, d_k), k: (..., T_k, d_k), v: (..., T_k, d_v)
        ->  out: (..., T_q, d_v), weights: (..., T_q, T_k)
    """
    check_query_key_value(q, k, v)
    scores = (q / math.sqrt(q.shape[-1])) @ k.transpose(-2, -1)  # 1. scaled scores: (..., T_q, T_k)
    check_mask("mask", mask, scores.shape)
    weights = _masked_softmax(scores, mask)  # 2. softmax over the allowed keys: (..., T_q, T_k)
    return weights @ v, weights  # 3. average of the values: (..., T_q, d_v), (..., T_q, T_k)


# ---------------------------------------------------------------------------
# 3. Masks (True = allowed)
# ---------------------------------------------------------------------------

def causal_mask(T_q, T_k=None, device=None):
    """Causal mask: query i may attend to keys j <= i (no peeking at the future).

        mask_ij = (j <= i)

    Returns a (T_q, T_k) bool tensor (T_k defaults to T_q), True on and below
    the diagonal. For T_q != T_k the diagonal starts at the top-left corner,
    as for torch's `is_causal=True`. Broadcasts to (B, h, T_q, T_k).

    >>> causal_mask(3)
    tensor([[ True, False, False],
            [ True,  True, False],
            [ True,  True,  True]])
    """
    T_k = T_q if T_k is None else T_k
    check_int("T_q", T_q)
    check_int("T_k", T_k)
    return torch.ones(T_q, T_k, dtype=torch.bool, device=device).tril()  # (T_q, T_k)


def padding_mask(lengths, max_len=None):
    """Padding mask from sequence lengths: key j of sequence b is real iff j < lengths[b].

        mask[b, 0, 0, j] = (j < lengths[b])

    lengths: (B,) ints (a tensor or a list), max_len: the padded length T
    (default: max(lengths))  ->  mask: (B, 1, 1, T) bool.

    The two singleton dims make it broadcast to the scores (B, h, T_q, T) of
    every head and every query: only keys are masked. Combine with a causal
    mask by `&`: causal_mask(T) & padding_mask(lengths) is (B, 1, T, T).
    """
    lengths = check_mask_lengths(lengths, max_len)
    T = int(lengths.max()) if max_len is None else max_len
    positions = torch.arange(T, device=lengths.device)  # (T,)
    mask = positions < lengths[:, None]  # (B, T)
    return mask[:, None, None, :]  # (B, 1, 1, T)


def padding_mask_from_tokens(tokens, pad_id):
    """Padding mask from token ids: key j of sequence b is real iff tokens[b, j] != pad_id.

    tokens: (B, T) integer ids  ->  mask: (B, 1, 1, T) bool, same layout as `padding_mask`.
    Every pad token is masked, wherever it is in the sequence.
    """
    if not isinstance(tokens, torch.Tensor):
        raise TypeError(f"tokens must be a torch.Tensor, got {type(tokens).__name__}")
    if tokens.dim() != 2:
        raise ValueError(f"tokens must have shape (B, T), got shape {shape_of(tokens)}")
    return (tokens != pad_id)[:, None, None, :]  # (B, 1, 1, T)
