"""Attention: course_lib's scaled dot-product attention against torch's."""

import torch
import torch.nn.functional as F
from common import compare_ms, record

from course_lib.attention import causal_mask, scaled_dot_product_attention


def sdpa_vs_torch(args):
    """course_lib vs torch scaled dot-product attention, forward + backward, CPU float32."""
    torch.manual_seed(0)
    records = []
    cases = [
        ("sdpa_fwd_bwd_vs_torch", 128, None),
        ("sdpa_fwd_bwd_vs_torch/T512", 512, None),
        ("sdpa_fwd_bwd_vs_torch/causal", 128, causal_mask(128)),
    ]
    for name, T, mask in cases:
        B, h, d = 32, 8, 64
        q, k, v = (torch.randn(B, h, T, d, requires_grad=True) for _ in range(3))
        inputs = (q, k, v, torch.randn(B, h, T, d))
        ours, theirs = compare_ms(
            lambda q, k, v, mask=mask: scaled_dot_product_attention(q, k, v, mask),
            lambda q, k, v, mask=mask: F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
            inputs,
            repeats=3 if args.quick else 10,
        )
        records.append(record(name, ours, "ms", baseline=theirs))
    return records


BENCHMARKS = [
    ("Attention: course_lib vs torch (forward + backward, CPU float32, B=32, h=8, d=64)", sdpa_vs_torch),
]
