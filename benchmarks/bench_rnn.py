"""Recurrent networks: course_lib's LSTM against torch.nn.LSTM, and the summaries of the
committed sweeps of chapters 1 and 2 (`benchmarks/sweeps_rnn.py` runs them)."""

import statistics
import time
import warnings

import torch

from common import record
from course_lib.rnn import LSTM
from sweeps_rnn import summary_records


def lstm_vs_torch(args):
    """course_lib LSTM vs torch.nn.LSTM (batch_first=True), forward + backward, CPU float32.

    Gradients w.r.t. the input and every parameter, as in training. Two baselines:
    torch as it runs by default (on CPU its LSTM is one fused oneDNN kernel per
    layer), and torch with oneDNN switched off, which loops over time in C++ with
    the same per-step operations as ours (so that ratio is the price of Python).
    """
    B, T, input_size, H = 32, 64, 64, 128
    torch.manual_seed(0)
    theirs = torch.nn.LSTM(input_size, H, batch_first=True)
    ours = LSTM(input_size, H)
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(B, T, input_size, requires_grad=True)
    grad_out = torch.randn(B, T, H)

    def fwd_bwd_ms(lstm):
        start = time.perf_counter()
        out, _ = lstm(x)
        torch.autograd.grad(out, (x, *lstm.parameters()), grad_out)
        return (time.perf_counter() - start) * 1e3

    def torch_without_onednn(_):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the flag's setter notes that TF32 needs an Intel GPU
            with torch.backends.mkldnn.flags(enabled=False):
                return fwd_bwd_ms(theirs)

    def one_thread(lstm):
        def run(_):
            threads = torch.get_num_threads()
            torch.set_num_threads(1)  # as the chapters run; steadier on a busy 2-core machine
            try:
                return fwd_bwd_ms(lstm)
            finally:
                torch.set_num_threads(threads)
        return run

    runners = {"ours": lambda _: fwd_bwd_ms(ours), "torch": lambda _: fwd_bwd_ms(theirs),
               "torch_no_onednn": torch_without_onednn,
               "ours_1_thread": one_thread(ours), "torch_1_thread": one_thread(theirs)}
    times = {name: [] for name in runners}
    warmup, repeats = 2, 5 if args.quick else 20
    for i in range(warmup + repeats):
        names = list(runners) if i % 2 == 0 else list(reversed(runners))  # interleaved
        for name in names:
            ms = runners[name](None)
            if i >= warmup:
                times[name].append(ms)
    ms = {name: statistics.median(t) for name, t in times.items()}
    return [
        record("lstm_fwd_bwd_vs_torch", ms["ours"], "ms", baseline=ms["torch"]),
        record("lstm_fwd_bwd_vs_torch/no_onednn", ms["ours"], "ms", baseline=ms["torch_no_onednn"]),
        record("lstm_fwd_bwd_vs_torch/1_thread", ms["ours_1_thread"], "ms", baseline=ms["torch_1_thread"]),
    ]


BENCHMARKS = [
    ("LSTM: course_lib vs torch (forward + backward, CPU float32, B=32, T=64, input 64, hidden 128)",
     lstm_vs_torch),
    ("Recurrent networks: the committed sweeps of chapters 1 and 2 (mean over seeds, spread = "
     "min to max; re-run with benchmarks/sweeps_rnn.py)", summary_records),
]
