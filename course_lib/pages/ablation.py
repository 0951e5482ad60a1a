"""Ablations of a trained or untrained Transformer: take a part away and measure what is lost.

    zero_head(attention, h)        one head's output set to zero (until the returned hook is removed)
    mean_head(attention, h, mean)  one head's output set to its mean output (the same)
    without_ffn(model)             every layer's position-wise FFN removed: x + FFN(x) becomes x

Chapter 9 removes each head of its trained date model in turn (both ways), and trains the same
model without FFNs (`benchmarks/bench_transformer.py`, sweeps paper_recipe_ablation and
transformer_heads).
"""

from __future__ import annotations

import torch

__all__ = ["zero_head", "mean_head", "without_ffn"]


def zero_head(attention, head):
    """Zero one head's output (its d_k columns at the input of W^O) of a
    `multihead.MultiHeadAttention` until the returned hook is removed (`handle.remove()`)."""
    d_k = attention.d_k

    def hook(module, args):
        x = args[0].clone()                                    # (B, T, h * d_k), heads side by side
        x[..., head * d_k:(head + 1) * d_k] = 0
        return (x,)
    return attention.out_proj.register_forward_pre_hook(hook)


def mean_head(attention, head, mean):
    """Replace one head's output (its d_k columns at the input of W^O) by a fixed vector: `mean`,
    the (h * d_k,) mean input of W^O over many positions (its head's slice is used), until the
    returned hook is removed. Unlike zeroing, this keeps the head's average contribution."""
    d_k = attention.d_k
    part = mean[head * d_k:(head + 1) * d_k]                   # (d_k,)

    def hook(module, args):
        x = args[0].clone()                                    # (B, T, h * d_k)
        x[..., head * d_k:(head + 1) * d_k] = part
        return (x,)
    return attention.out_proj.register_forward_pre_hook(hook)


def without_ffn(model):
    """Remove the FFN of every encoder and decoder layer of a `transformer.Transformer`, in place:
    its two linear layers are deleted and the sub-layer adds zero, so pre-LN's x + FFN(norm(x))
    is x and post-LN's norm(x + FFN(x)) is norm(x). Returns the model."""
    for layer in [*model.encoder.layers, *model.decoder.layers]:
        layer.linear1 = layer.linear2 = None                   # their parameters are gone
        layer._feed_forward = torch.zeros_like                 # the sub-layer's output: zeros
    return model
