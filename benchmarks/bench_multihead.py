"""Multi-head attention: course_lib's MultiHeadAttention against torch.nn.MultiheadAttention.

Like for like: the same parameters (state dict loaded), self-attention on the same input, a
forward pass and a backward pass that computes the gradients of the input AND of every
parameter, CPU float32. The headline record asks torch for the per-head weights too
(need_weights=True, average_attn_weights=False), as ours always returns them; a second
record compares with torch's fused path (need_weights=False), which returns no weights.
"""

import statistics
import time

import torch
import torch.nn as nn
from common import record

from course_lib.multihead import MultiHeadAttention


def _fwd_bwd_ms(module, call, x, grad_out):
    start = time.perf_counter()
    out = call(module, x)
    out.backward(grad_out)
    ms = (time.perf_counter() - start) * 1e3
    module.zero_grad(set_to_none=True)
    x.grad = None
    return ms


def _compare(ours, theirs, x, grad_out, repeats, warmup=2):
    """Median ms of each, timed alternately on the same input."""
    times = {"ours": [], "theirs": []}
    for i in range(warmup + repeats):
        order = [("ours", *ours), ("theirs", *theirs)]
        for name, module, call in (order if i % 2 == 0 else order[::-1]):
            ms = _fwd_bwd_ms(module, call, x, grad_out)
            if i >= warmup:
                times[name].append(ms)
    return statistics.median(times["ours"]), statistics.median(times["theirs"])


def mha_fwd_bwd_vs_torch(args):
    """course_lib MultiHeadAttention vs nn.MultiheadAttention, forward + backward, CPU float32."""
    torch.manual_seed(0)
    B, T, d_model, h = 32, 128, 256, 8
    theirs = nn.MultiheadAttention(d_model, h, batch_first=True)
    ours = MultiHeadAttention(d_model, h)
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(B, T, d_model, requires_grad=True)
    grad_out = torch.randn(B, T, d_model)
    repeats = 3 if args.quick else 10

    call_ours = lambda m, x: m(x, x, x)[0]  # noqa: E731 - returns per-head weights as well
    with_weights = lambda m, x: m(x, x, x, need_weights=True, average_attn_weights=False)[0]  # noqa: E731
    fused = lambda m, x: m(x, x, x, need_weights=False)[0]  # noqa: E731
    records = []
    for name, call_theirs in [("mha_fwd_bwd_vs_torch", with_weights),
                              ("mha_fwd_bwd_vs_torch/fused_no_weights", fused)]:
        ms_ours, ms_theirs = _compare((ours, call_ours), (theirs, call_theirs), x, grad_out, repeats)
        records.append(record(name, ms_ours, "ms", baseline=ms_theirs))
    return records


BENCHMARKS = [
    ("Multi-head attention: course_lib vs torch (self-attention, forward + backward incl. parameter "
     "gradients, CPU float32, B=32, T=128, d_model=256, h=8)", mha_fwd_bwd_vs_torch),
]
