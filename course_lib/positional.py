"""Positional encodings: telling self-attention where each token is.

Self-attention treats its input as a set (permute the tokens and the outputs are
permuted the same way), so order must be added to the inputs. Two ways:

    sinusoidal (Vaswani et al., 2017), fixed:
        PE[pos, 2i]   = sin(pos / 10000^(2i / d_model))
        PE[pos, 2i+1] = cos(pos / 10000^(2i / d_model))
    learned (BERT, GPT-2): one trained vector per position, P[pos] = Embedding(pos)

Both are added to the token embeddings: x + PE[:T].
"""

import math

import torch
import torch.nn as nn

__all__ = ["sinusoidal_encoding", "SinusoidalPositionalEncoding", "LearnedPositionalEmbedding"]


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

    It has no vector for positions >= max_len, and rows never reached in training
    stay at their random initial values: it cannot extrapolate.

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
