"""Recurrent networks: course_lib's LSTM against torch.nn.LSTM, and the character-level
language models of book/02_lstm_and_gru.ipynb (held-out bits per character)."""

import statistics
import time
import warnings

import math

import torch

from common import record
from course_lib.rnn import CHAR_LM_RECIPE, LSTM, train_char_lm


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


def charlm_heldout_bpc(args):
    """RNN, LSTM and GRU character-level language models on pydoc_data, trained exactly as in
    book/02_lstm_and_gru.ipynb (course_lib.rnn.CHAR_LM_RECIPE: equal numbers of steps
    calibrated to about equal wall time; seed 0; one thread, as the notebook sets), then
    scored on the held-out test text.

    charlm_heldout_bpc/<kind>: bits per character on the test split; baseline: the unigram
    model (character frequencies of the training split, add-one smoothing) on the same text.
    charlm_train_seconds/<kind>: wall time of that training here (steps + one validation pass);
    baseline: the LSTM's, so the ratios show how equal the time budget was on this machine.
    """
    from course_lib.data import char_corpus
    from course_lib.train import lm_heldout_loss

    corpus = char_corpus()
    counts = torch.bincount(corpus.train, minlength=len(corpus.vocab)).double() + 1
    unigram_bpc = -(counts / counts.sum()).log2()[corpus.test].mean().item()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        bpc, seconds = {}, {}
        for kind, recipe in CHAR_LM_RECIPE.items():
            model, history = train_char_lm(kind, corpus, **recipe, lr=1e-2, seed=0, progress=False)
            bpc[kind] = lm_heldout_loss(model, corpus.test) / math.log(2)
            seconds[kind] = history.seconds
    finally:
        torch.set_num_threads(threads)
    return ([record(f"charlm_heldout_bpc/{kind}", bpc[kind], "bpc", baseline=unigram_bpc) for kind in bpc]
            + [record(f"charlm_train_seconds/{kind}", seconds[kind], "s", baseline=seconds["lstm"])
               for kind in seconds])


BENCHMARKS = [
    ("LSTM: course_lib vs torch (forward + backward, CPU float32, B=32, T=64, input 64, hidden 128)",
     lstm_vs_torch),
    ("Character-level language models on pydoc_data (book/02_lstm_and_gru.ipynb): held-out bits per "
     "character vs the unigram baseline, training time vs the LSTM's", charlm_heldout_bpc),
]
