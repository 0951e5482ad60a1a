"""The book's headline numbers, reproducible outside the notebooks.

    python benchmarks/run.py                  # everything
    python benchmarks/run.py --quick          # fewer timing repeats
    python benchmarks/run.py --skip-notebooks # do not execute book/**/*.ipynb

Prints one Markdown table per section and writes benchmarks/results.json, a list
of records {"name", "value", "unit", "baseline", "ratio"}; baseline and ratio
(value / baseline) are set where a comparison exists, measured in the same run.
To add a benchmark, write a function `(args) -> list of records` and append it
to BENCHMARKS.
"""

import argparse
import json
import os
import re
import statistics
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # course_lib importable from a plain clone

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from course_lib.attention import causal_mask, scaled_dot_product_attention  # noqa: E402
from course_lib.rnn import LSTM  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results.json"


def record(name, value, unit, baseline=None):
    ratio = value / baseline if baseline else None
    return {"name": name, "value": value, "unit": unit, "baseline": baseline, "ratio": ratio}


# ---------------------------------------------------------------------------
# Speed: ours vs torch, interleaved in one run
# ---------------------------------------------------------------------------

def fwd_bwd_ms(attention, q, k, v, grad_out):
    """Milliseconds for one forward and backward pass of `attention(q, k, v)`."""
    start = time.perf_counter()
    out = attention(q, k, v)
    out = out[0] if isinstance(out, tuple) else out  # ours also returns the weights
    torch.autograd.grad(out, (q, k, v), grad_out)
    return (time.perf_counter() - start) * 1e3


def compare_ms(ours, theirs, inputs, repeats, warmup=2):
    """Median ms of `ours` and `theirs`, timed alternately on the same inputs."""
    times = {ours: [], theirs: []}
    for i in range(warmup + repeats):
        order = (ours, theirs) if i % 2 == 0 else (theirs, ours)
        for fn in order:
            ms = fwd_bwd_ms(fn, *inputs)
            if i >= warmup:
                times[fn].append(ms)
    return statistics.median(times[ours]), statistics.median(times[theirs])


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
            lambda q, k, v: scaled_dot_product_attention(q, k, v, mask),
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
            inputs, repeats=3 if args.quick else 10,
        )
        records.append(record(name, ours, "ms", baseline=theirs))
    return records


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

    runners = {"ours": lambda _: fwd_bwd_ms(ours), "torch": lambda _: fwd_bwd_ms(theirs),
               "torch_no_onednn": torch_without_onednn}
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
    ]


# ---------------------------------------------------------------------------
# Notebooks: wall time of a full run, top to bottom
# ---------------------------------------------------------------------------

def notebook_seconds(args):
    notebooks = sorted((ROOT / "book").glob("**/*.ipynb"))
    notebooks = [nb for nb in notebooks if ".ipynb_checkpoints" not in nb.parts]
    if args.skip_notebooks or not notebooks:
        print("(notebooks skipped)" if args.skip_notebooks else "(no notebooks in book/ yet)")
        return []
    import nbformat
    from nbclient import NotebookClient

    records = []
    for path in notebooks:
        start = time.perf_counter()
        try:
            nb = nbformat.read(path, as_version=4)
            NotebookClient(nb, timeout=600, kernel_name="python3",
                           resources={"metadata": {"path": str(path.parent)}}).execute()
        except Exception as error:  # report and go on with the others
            message = re.sub(r"\x1b\[[0-9;]*m", "", str(error))  # drop the traceback's colours
            print(f"FAILED {path.relative_to(ROOT)}: {type(error).__name__}: {message}"[:2000])
            args.failed = True
            continue
        records.append(record(f"notebook_seconds/{path.name}", time.perf_counter() - start, "s"))
    return records


# ---------------------------------------------------------------------------
# The built site: how heavy is each page?
# ---------------------------------------------------------------------------

def page_sizes(args):
    site = ROOT / "_build" / "html"
    if not site.is_dir():
        print(f"(no site at {site.relative_to(ROOT)}: run `make book` first to measure page sizes)")
        return []
    records = []
    for page in sorted(site.glob("**/*.html")):
        rel = page.relative_to(site)
        if rel.name in ("genindex.html", "search.html") or "_static" in rel.parts:
            continue
        records.append(record(f"page_kb/{rel.as_posix()}", page.stat().st_size / 1e3, "KB"))
    total = sum(f.stat().st_size for f in site.glob("**/*") if f.is_file())
    records.append(record("site_total_mb", total / 1e6, "MB"))
    return records


BENCHMARKS = [
    ("Attention: course_lib vs torch (forward + backward, CPU float32, B=32, h=8, d=64)", sdpa_vs_torch),
    ("LSTM: course_lib vs torch (forward + backward, CPU float32, B=32, T=64, input 64, hidden 128)",
     lstm_vs_torch),
    ("Notebooks: seconds to run top to bottom", notebook_seconds),
    ("Built site: page sizes", page_sizes),
]


# ---------------------------------------------------------------------------

def markdown_table(records):
    def fmt(x):
        if x is None:
            return ""
        return f"{x:.1f}" if abs(x) >= 100 else f"{x:.3g}"

    lines = ["| name | value | unit | baseline | ratio |", "|---|---:|---|---:|---:|"]
    for r in records:
        lines.append(f"| {r['name']} | {fmt(r['value'])} | {r['unit']} | "
                     f"{fmt(r['baseline'])} | {fmt(r['ratio'])} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer timing repeats")
    parser.add_argument("--skip-notebooks", action="store_true", help="do not execute the notebooks")
    args = parser.parse_args(argv)
    args.failed = False

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {sys.platform}\n")
    results = []
    for title, benchmark in BENCHMARKS:
        print(f"### {title}\n")
        records = benchmark(args)
        if records:
            print(markdown_table(records))
        print()
        results += records

    tmp = RESULTS.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(results, indent=2) + "\n")
    os.replace(tmp, RESULTS)
    print(f"wrote {len(results)} records to {RESULTS.relative_to(ROOT)}")
    return 1 if args.failed else 0


if __name__ == "__main__":
    sys.exit(main())
