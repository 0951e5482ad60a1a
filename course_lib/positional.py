"""Positional encodings: telling self-attention where each token is.

Self-attention treats its input as a set (permute the tokens and the outputs are
permuted the same way), so order must be added to the inputs. Two ways:

    sinusoidal (Vaswani et al., 2017), fixed:
        PE[pos, 2i]   = sin(pos / 10000^(2i / d_model))
        PE[pos, 2i+1] = cos(pos / 10000^(2i / d_model))
    learned (BERT, GPT-2): one trained vector per position, P[pos] = Embedding(pos)

Both are added to the token embeddings: x + PE[:T]. Two relative schemes add nothing to the
inputs and act on the attention scores instead:

    RoPE (Su et al., 2021): rotate each query and key pair (2i, 2i+1) by the angle t * w_i of
        its position t, so that the score (R_s q) . (R_t k) = q . R_(t-s) k depends on t - s only
        (`apply_rope`);
    ALiBi (Press et al., 2022): add -m_h * (i - j) to the score of query i and key j, a slope
        m_h per head (`alibi_slopes`, `alibi_bias`).
"""

import math

import torch
import torch.nn as nn

__all__ = ["sinusoidal_encoding", "SinusoidalPositionalEncoding", "LearnedPositionalEmbedding",
           "apply_rope", "alibi_slopes", "alibi_bias"]


def sinusoidal_encoding(max_len, d_model, base=10000.0):
    """The sinusoidal table PE: (max_len, d_model).

    Column pair (2i, 2i+1) is a sine and a cosine of angular frequency
    w_i = base^(-2i / d_model), from 1 (period 2 pi) down to about 1/base. For an
    odd d_model the last column is the sine of the last frequency (no cosine).
    """
    if not isinstance(max_len, int) or max_len < 1:
        raise ValueError(f"max_len must be a positive int, got {max_len!r}")
    if not isinstance(d_model, int) or d_model < 1:
        raise ValueError(f"d_model must be a positive int, got {d_model!r}")
    position = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)      # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)                # (ceil(d/2),)
    frequency = torch.exp(-math.log(base) * two_i / d_model)                # (ceil(d/2),)
    angle = position * frequency                                            # (max_len, ceil(d/2))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return pe


class SinusoidalPositionalEncoding(nn.Module):
    """x + PE[:T] (then dropout). No parameters; PE is a buffer of max_len rows.

    forward(x: (B, T, d_model)) -> (B, T, d_model)
    """

    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, start=0):
        """x (B, T, d_model) at positions start..start+T-1 -> x + PE[start:start+T]."""
        _check_input(x, self.d_model, self.max_len, start)
        return self.dropout(x + self.pe[start: start + x.shape[1]])   # (B, T, d) + (T, d)


class LearnedPositionalEmbedding(nn.Module):
    """x + P[:T] (then dropout), where P is a trained (max_len, d_model) table.

    It has no vector for positions >= max_len, and rows never reached in training get
    no gradient from the loss (they keep their random initial values, or shrink under
    weight decay): it cannot extrapolate.

    forward(x: (B, T, d_model)) -> (B, T, d_model)
    """

    def __init__(self, d_model, max_len, dropout=0.0):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.embedding = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.embedding.weight, std=0.02)   # as GPT-2
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, start=0):
        """x (B, T, d_model) at positions start..start+T-1 -> x + P[start:start+T]."""
        _check_input(x, self.d_model, self.max_len, start)
        positions = torch.arange(start, start + x.shape[1], device=x.device)   # (T,)
        return self.dropout(x + self.embedding(positions))      # (B, T, d) + (T, d)


def _check_input(x, d_model, max_len, start=0):
    if x.dim() != 3 or x.shape[-1] != d_model:
        raise ValueError(f"x must be (B, T, d_model={d_model}), got shape {tuple(x.shape)}")
    if start + x.shape[1] > max_len:
        raise ValueError(f"sequence length T={x.shape[1]} from position {start} exceeds "
                         f"max_len={max_len}")


def apply_rope(x, base=10000.0, start=0):
    """Rotary position embedding (Su et al., 2021): rotate every feature pair by its position.

    x: (..., T, d) with d even, the queries or the keys of one head at positions
    start .. start+T-1. Pair (2i, 2i+1) of position t turns by the angle theta = t * w_i,
    w_i = base^(-2i / d) (the frequencies of the sinusoidal encoding):

        y[t, 2i]   = x[t, 2i] cos(theta) - x[t, 2i+1] sin(theta)
        y[t, 2i+1] = x[t, 2i] sin(theta) + x[t, 2i+1] cos(theta)

    Rotations compose, R_s^T R_t = R_(t-s), so after rotating queries and keys the score
    (R_s q) . (R_t k) = q . R_(t-s) k depends on the positions only through the offset t - s.
    Returns a tensor of x's shape.
    """
    T, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"RoPE rotates feature pairs: the last dim must be even, got {d}")
    dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    position = torch.arange(start, start + T, dtype=dtype, device=x.device)[:, None]
    frequency = base ** (-torch.arange(0, d, 2, dtype=dtype, device=x.device) / d)
    theta = position * frequency                                   # (T, d/2)
    cos, sin = torch.cos(theta).to(x.dtype), torch.sin(theta).to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]                         # (..., T, d/2) each
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], -1).flatten(-2)


def alibi_slopes(num_heads):
    """ALiBi's slopes (Press et al., 2022): m_h = 2^(-8h / num_heads) for h = 1 .. num_heads,
    a geometric sequence from 2^(-8/num_heads) down to 2^-8. Returns (num_heads,)."""
    if not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError(f"num_heads must be a positive int, got {num_heads!r}")
    return 2.0 ** (-8.0 * torch.arange(1, num_heads + 1, dtype=torch.float32) / num_heads)


def alibi_bias(T, num_heads, causal=True, slopes=None):
    """ALiBi's bias, a float mask added to the scores (Press et al., 2022).

        bias[h, i, j] = -m_h * (i - j)     for keys j <= i
                      = -inf                for j > i (causal=True; ALiBi is used in decoders)

    With causal=False the bias is -m_h * |i - j| on both sides. slopes: the m_h, a (num_heads,)
    tensor (default: `alibi_slopes(num_heads)`, the paper's). Returns (num_heads, T, T), which
    broadcasts against scores (B, num_heads, T, T).
    """
    if slopes is None:
        slopes = alibi_slopes(num_heads)
    elif not torch.is_tensor(slopes) or tuple(slopes.shape) != (num_heads,):
        raise ValueError(f"slopes must be a tensor of shape (num_heads,) = ({num_heads},), got "
                         f"{tuple(slopes.shape) if torch.is_tensor(slopes) else type(slopes).__name__}")
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    distance = (i - j).abs().float() if not causal else (i - j).float()       # (T, T)
    bias = -slopes.float()[:, None, None] * distance                          # (h, T, T)
    return bias.masked_fill(j > i, -math.inf) if causal else bias
