"""Recurrent networks: course_lib's LSTM against torch.nn.LSTM, and chapter 2's sweep.

    python benchmarks/run.py --only lstm_vs_torch   # the timing benchmark
    python benchmarks/sweep.py charlm_equal_params  # RNN vs GRU vs LSTM language models

charlm_equal_params: the three character-level language models of chapter 2 (course_lib.charlm:
train_char_lm with charlm.CHAR_LM_RECIPE) at about the same number of parameters, the gated
cells with and without their gate bias, 3 seeds each, the same numbers of steps, one learning
rate; validation and test bits per character every 300 steps. One torch thread per run.
"""

import statistics
import time
import warnings

import torch
from common import SweepSpec, record

from course_lib.rnn import LSTM


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

    runners = {
        "ours": lambda _: fwd_bwd_ms(ours),
        "torch": lambda _: fwd_bwd_ms(theirs),
        "torch_no_onednn": torch_without_onednn,
        "ours_1_thread": one_thread(ours),
        "torch_1_thread": one_thread(theirs),
    }
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
    (
        "LSTM: course_lib vs torch (forward + backward, CPU float32, B=32, T=64, input 64, hidden 128)",
        lstm_vs_torch,
    ),
]


# ---------------------------------------------------------------------------
# Chapter 2: RNN vs GRU vs LSTM language models at equal steps
# ---------------------------------------------------------------------------

_CORPUS = {}


def _corpus():
    if not _CORPUS:
        from course_lib.data import char_corpus

        _CORPUS["c"] = char_corpus()
    return _CORPUS["c"]


def charlm_run(point, seed, config):
    """One language model of chapter 2 (charlm.train_char_lm) with the point's cell, hidden size
    and memory-gate bias (gate_bias: the LSTM's forget bias or the GRU's update bias; None keeps
    torch's initialisation), trained for config["steps"]: held-out bits per character on the
    whole validation and test pieces every config["eval_every"] steps (val_bpc_<step>,
    test_bpc_<step>), and the number of parameters. With a constant learning rate, the value
    at step 300 is that of a 300-step run."""
    import math

    from course_lib.charlm import train_char_lm
    from course_lib.train import LMRecipe, lm_heldout_loss

    corpus = _corpus()

    def eval_fn(model):
        return [
            lm_heldout_loss(model, corpus.val) / math.log(2),
            lm_heldout_loss(model, corpus.test) / math.log(2),
        ]

    model, history = train_char_lm(
        point["cell"],
        corpus,
        config["steps"],
        LMRecipe(lr=config["lr"]),
        hidden_size=point["hidden_size"],
        gate_bias=point["gate_bias"],
        seed=seed,
        eval_every=config["eval_every"],
        eval_fn=eval_fn,
        progress=False,
    )
    out = {"parameters": sum(p.numel() for p in model.parameters())}
    for step, (val, test) in history.evals:
        out[f"val_bpc_{step}"], out[f"test_bpc_{step}"] = val, test
    return out


def _charlm_points():
    """The recipe's three cells (GRU and LSTM with gate bias 1), and the GRU and the LSTM with
    torch's initialisation as well (gate_bias None): the initialisation's share, measured."""
    from course_lib.charlm import CHAR_LM_RECIPE as r

    points = []
    for cell, options in r["cells"].items():
        bias = options.get("gate_bias")
        if bias is not None:
            points.append({"cell": cell, "hidden_size": options["hidden_size"], "gate_bias": None})
        points.append({"cell": cell, "hidden_size": options["hidden_size"], "gate_bias": bias})
    return points


def _charlm_config():
    from course_lib.charlm import CHAR_LM_RECIPE as r

    return {
        "steps": max(r["budgets"]),
        "budgets": list(r["budgets"]),
        "eval_every": min(r["budgets"]),
        "lr": r["lr"],
    }


_CHARLM = _charlm_config()
_CHARLM_STEPS = range(_CHARLM["eval_every"], _CHARLM["steps"] + 1, _CHARLM["eval_every"])

SWEEPS = {
    "charlm_equal_params": SweepSpec(
        title="Character LMs at equal parameters: RNN vs GRU vs LSTM, with and without the gate bias",
        run=charlm_run,
        points=_charlm_points(),
        config=_CHARLM,
        smoke={"steps": 8, "eval_every": 4},
        margins={"bpc": 0.05, "init_paired": 0.01},
        metrics={
            **{
                f"{split}_bpc_{s}": {"unit": "bits/char", "higher_is_better": False}
                for s in _CHARLM_STEPS
                for split in ("val", "test")
            },
            "parameters": {"unit": "", "higher_is_better": False},
        },
        records=[
            (f"val_bpc_{s}", f"charlm_heldout_bpc/{{cell}}{{hidden_size}}/bias{{gate_bias}}/{s}")
            for s in _CHARLM["budgets"]
        ],
        description="CharLM (embedding 32, one recurrent layer, read-out) at about 99.7k parameters: "
        "RNN 249 units, GRU 148, LSTM 128; the GRU's update-gate bias and the LSTM's forget-gate "
        "bias at torch's initialisation (gate_bias None) or at 1 (the chapter's recommendation). "
        "Trained by charlm.train_char_lm: Adam at a constant learning rate 0.01 (not tuned per "
        "cell), batches of 32 random windows of 64 characters, gradients clipped to norm 1. "
        "3 seeds per point, 1500 steps; bits per character on the whole validation and test "
        "pieces every 300 steps. Margins: bpc, a difference a reader would notice (0.05 bits, worst seed "
        "against best); init_paired, the effect of the gate bias seed by seed (same seed, same data).",
    ),
}


def charlm_lr_run(point, seed, config):
    """charlm_run with the learning rate taken from the point."""
    return charlm_run(point, seed, dict(config, lr=point["lr"]))


SWEEPS["charlm_rnn_lr"] = SweepSpec(
    title="Character LMs at equal parameters: the vanilla RNN (249 units) at learning rate 0.003",
    run=charlm_lr_run,
    points=[{"cell": "rnn", "hidden_size": 249, "gate_bias": None, "lr": 3e-3}],
    config=_CHARLM,
    smoke={"steps": 8, "eval_every": 4},
    margins={"bpc": 0.05},
    metrics=SWEEPS["charlm_equal_params"].metrics,
    records=[(f"val_bpc_{s}", f"charlm_heldout_bpc/rnn249/lr0.003/{s}") for s in _CHARLM["budgets"]],
    description="The vanilla RNN of charlm_equal_params (249 units, about 99.7k parameters) with a smaller "
    "learning rate, 0.003 instead of 0.01 (its validation loss rises late in training at 0.01 in every "
    "seed): is its gap to the gated cells a matter of its learning rate? Otherwise the same recipe, "
    "3 seeds, 1500 steps. Margin bpc: as in charlm_equal_params.",
)


# ---------------------------------------------------------------------------
# Chapter 2: stacked bidirectional layers put the spaces back
# ---------------------------------------------------------------------------

_SEGMENTER = {"steps": 1000, "eval_every": 100, "lr": 1e-2, "hidden": {"bidirectional": 32, "forward": 52}}


def segmenter_run(point, seed, config):
    """One segmenter of chapter 2 (course_lib.pages.rnn_experiments.train_segmenter): two stacked GRU
    layers read the text without its spaces and say after which characters a space stood.
    Validation error and bits every config["eval_every"] steps (val_error_<step>,
    val_bits_<step>), test scores at the end, and the number of parameters."""
    from course_lib.pages.rnn_experiments import segmentation_scores, train_segmenter, unspaced

    corpus = _corpus()
    direction = point["direction"]
    model, history = train_segmenter(
        corpus,
        config["steps"],
        bidirectional=direction == "bidirectional",
        hidden_size=config["hidden"][direction],
        lr=config["lr"],
        seed=seed,
        eval_every=config["eval_every"],
    )
    out = {}
    for step, scores in history.evals:
        out[f"val_error_{step}"], out[f"val_bits_{step}"] = scores["error"], scores["bits"]
    test = segmentation_scores(model, *unspaced(corpus.test, corpus.vocab.stoi[" "]))
    out.update(
        test_error=test["error"],
        test_bits=test["bits"],
        parameters=sum(p.numel() for p in model.parameters()),
    )
    return out


_SEGMENTER_STEPS = range(_SEGMENTER["eval_every"], _SEGMENTER["steps"] + 1, _SEGMENTER["eval_every"])

SWEEPS["charlm_segmenter"] = SweepSpec(
    title="Word segmentation: two stacked GRU layers, bidirectional or forward only (equal parameters)",
    run=segmenter_run,
    points=[{"direction": "bidirectional"}, {"direction": "forward"}],
    config=_SEGMENTER,
    smoke={"steps": 8, "eval_every": 4},
    margins={"error": 0.02},
    metrics={
        **{
            f"val_{m}_{s}": {"unit": "share" if m == "error" else "bits/char", "higher_is_better": False}
            for s in _SEGMENTER_STEPS
            for m in ("error", "bits")
        },
        "test_error": {"unit": "share", "higher_is_better": False},
        "test_bits": {"unit": "bits/char", "higher_is_better": False},
        "parameters": {"unit": "", "higher_is_better": False},
    },
    records=[("test_error", "charlm_segmenter_test_error/{direction}")],
    description="The text of chapter 2 with its spaces removed; a model of two stacked GRU layers "
    "(course_lib.pages.rnn_experiments.Segmenter) says after which characters a space stood. "
    "Bidirectional (32 units per direction) or forward only (52 units: about the same "
    "number of parameters); Adam at 0.01, batches of 32 windows of 32 characters, "
    "gradients clipped to norm 1; 3 seeds, 1000 steps, validation scores every 100 steps.",
)
