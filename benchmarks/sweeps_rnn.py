"""The sweeps behind chapters 1 and 2: many seeds, learning rates and budgets, too long for a
notebook. Each writes course_lib/sweeps/<name>.json (configuration, seeds, per-run results,
the fingerprint of the recipe that produced them); the chapters plot it and overlay their own
live run, which must fall inside it.

    python benchmarks/sweeps_rnn.py adding_cells [--jobs 2]   # chapters 1-2: the adding problem
    python benchmarks/sweeps_rnn.py charlm_cells [--jobs 2]   # chapter 2: RNN vs GRU vs LSTM
    python benchmarks/sweeps_rnn.py --list                    # the sweeps and what they cost

One thread per run (as the chapters run), `--jobs` runs in parallel. Times on the course's
2-core machine are in each sweep's docstring and in its file ("seconds").
"""

import argparse
import hashlib
import inspect
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from course_lib import adding, charlm, recipes, rnn_experiments, train  # noqa: E402
from course_lib.rnn_experiments import SWEEPS_DIR, load_sweep, summarise_charlm  # noqa: E402


def fingerprint(*objects, config=None):
    """sha256 of the source of the functions and classes that produced a sweep, and its config:
    it changes when the recipe changes, so a stale committed sweep can be detected."""
    h = hashlib.sha256()
    for obj in objects:
        h.update(inspect.getsource(obj).encode())
    h.update(json.dumps(config, sort_keys=True).encode())
    return h.hexdigest()[:16]


# ---------------------------------------------------------------------------
# Chapter 2: character-level language models
# ---------------------------------------------------------------------------

_CORPUS = None


def _corpus():
    global _CORPUS
    if _CORPUS is None:
        from course_lib.data import char_corpus
        _CORPUS = char_corpus()
    return _CORPUS


def charlm_run(cell, lr, seed, steps, eval_every):
    """One language model of chapter 2, trained by recipes.train_char_lm: the held-out loss
    (nats per character) on the whole validation and test pieces every `eval_every` steps."""
    torch.set_num_threads(1)
    corpus = _corpus()
    forget_bias = recipes.CHAR_LM_RECIPE["forget_bias"].get(cell)

    def eval_fn(model):
        return [train.lm_heldout_loss(model, corpus.val), train.lm_heldout_loss(model, corpus.test)]

    start = time.perf_counter()
    _, history = recipes.train_char_lm(cell, corpus, steps, lr=lr, seed=seed,
                                       forget_bias=forget_bias, eval_every=eval_every,
                                       eval_fn=eval_fn, progress=False)
    loss = torch.tensor(history.train_loss)
    return {"cell": cell, "lr": lr, "seed": seed, "steps": steps,
            "evals": [[step, val, test] for step, (val, test) in history.evals],
            "train_loss_per_50": loss.view(-1, 50).mean(1).tolist() if steps % 50 == 0 else [],
            "seconds": time.perf_counter() - start}


STATEFUL = {"cell": "lstm", "lr": 1e-2, "steps": 3000, "seeds": (0, 1, 2), "contexts": (64, 256, 1024)}
"""The LSTM of chapter 2 trained on random windows (as in the comparison) or statefully (char-rnn:
consecutive windows of parallel streams, the state carried across, the gradient cut at each
window's start), then evaluated with windows of 64, 256 and 1024 characters."""


def charlm_stateful_run(stateful, seed):
    """One LSTM of chapter 2, random windows or stateful; held-out loss by context length."""
    torch.set_num_threads(1)
    corpus = _corpus()
    start = time.perf_counter()
    model, history = recipes.train_char_lm(
        STATEFUL["cell"], corpus, STATEFUL["steps"], lr=STATEFUL["lr"], seed=seed,
        forget_bias=recipes.CHAR_LM_RECIPE["forget_bias"].get(STATEFUL["cell"]), stateful=stateful,
        eval_every=500, progress=False)
    context = {str(L): [train.lm_heldout_loss(model, corpus.val, seq_len=L),
                        train.lm_heldout_loss(model, corpus.test, seq_len=L)]
               for L in STATEFUL["contexts"]}
    return {"stateful": stateful, "seed": seed, "evals": history.evals, "context": context,
            "seconds": time.perf_counter() - start}


def charlm_cells_configs():
    r = recipes.CHAR_LM_RECIPE
    return [dict(cell=cell, lr=lr, seed=seed, steps=max(r["budgets"]), eval_every=100)
            for seed in r["seeds"] for lr in r["learning_rates"] for cell in r["cells"]]


# ---------------------------------------------------------------------------
# Chapter 1 (and 2): the adding problem
# ---------------------------------------------------------------------------

ADDING = {
    "steps": 5000,
    "eval_every": 250,
    "learning_rates": (1e-3, 1e-2),
    "seeds": (0, 1, 2),
}
"""The adding problem's comparisons: every model trained by adding.train_adding for the same
number of steps at each of two learning rates, from three seeds."""


def adding_run(cell, T, lr, seed, steps, eval_every, init="default", truncate=None, target="sum"):
    """One model of the adding problem: the validation MSE every `eval_every` steps (4000 fresh
    sequences, used to pick the learning rate), the test MSE at the end (4000 others), and what
    it remembers (adding.remembered_values, adding.marked_value_gain)."""
    torch.set_num_threads(1)
    start = time.perf_counter()
    model, history = adding.train_adding(cell, T, steps, seed=seed, lr=lr, init=init,
                                         truncate=truncate, target=target, eval_every=eval_every)
    return {"cell": cell, "T": T, "lr": lr, "seed": seed, "steps": steps, "init": init,
            "truncate": truncate, "target": target, "evals": history.evals,
            "test_mse": adding.adding_mse(model, T, seed=20_000, target=target),
            "remembered": adding.remembered_values(model, T, target=target),
            "gain": adding.marked_value_gain(model, T).tolist(),
            "seconds": time.perf_counter() - start}


def _adding_configs(cells, Ts, inits=("default",), truncates=(None,), target="sum"):
    a = ADDING
    return [dict(cell=cell, T=T, lr=lr, seed=seed, steps=a["steps"], eval_every=a["eval_every"],
                 init=init, truncate=k, target=target)
            for seed in a["seeds"] for lr in a["learning_rates"] for T in Ts
            for cell in cells for init in inits for k in truncates]


_ADDING_SOURCES = (adding_run, adding.train_adding, adding.AddingRegressor, adding.adding_batch,
                   adding.remembered_values, adding.marked_value_gain, train.fit)


def _adding_sweep(about, **grid):
    return dict(run=adding_run, configs=lambda: _adding_configs(**grid), sources=_ADDING_SOURCES,
                config=lambda: dict(ADDING, **{k: list(v) if isinstance(v, tuple) else v
                                               for k, v in grid.items()}), about=about)


# ---------------------------------------------------------------------------
# Chapter 2: stacked bidirectional layers put the spaces back
# ---------------------------------------------------------------------------

SEGMENTER = {"steps": 1000, "eval_every": 100, "learning_rates": (3e-3, 1e-2),
             "seeds": (0, 1, 2), "hidden": {"bidirectional": 32, "forward": 52}}
"""Two layers of GRUs read a text without its spaces and say where the spaces were: both
directions (32 units each) or the forward one alone (52 units: about the same number of
parameters), each at two learning rates from three seeds, the same number of steps."""


def segmenter_run(direction, lr, seed, steps, eval_every):
    """One segmenter of chapter 2 (rnn_experiments.train_segmenter): validation scores every
    `eval_every` steps, test scores at the end."""
    torch.set_num_threads(1)
    corpus = _corpus()
    start = time.perf_counter()
    model, history = rnn_experiments.train_segmenter(
        corpus, steps, bidirectional=direction == "bidirectional", lr=lr, seed=seed,
        hidden_size=SEGMENTER["hidden"][direction], eval_every=eval_every)
    x_test, y_test = rnn_experiments.unspaced(corpus.test, corpus.vocab.stoi[" "])
    return {"direction": direction, "lr": lr, "seed": seed, "steps": steps,
            "parameters": sum(p.numel() for p in model.parameters()),
            "evals": [[step, s["bits"], s["error"]] for step, s in history.evals],
            "test": rnn_experiments.segmentation_scores(model, x_test, y_test),
            "seconds": time.perf_counter() - start}


SWEEPS = {
    "adding_cells": _adding_sweep(
        "chapters 1 and 2: vanilla RNN, LSTM and GRU on the adding problem at T = 10, 20, 40, 80 "
        "(2 learning rates x 3 seeds, 5000 steps each)", cells=("rnn", "lstm", "gru"),
        Ts=(10, 20, 40, 80)),
    "adding_inits": _adding_sweep(
        "chapter 1: the vanilla RNN with an orthogonal W_hh and the IRNN (ReLU, W_hh = I) at "
        "T = 40 and 80 (2 learning rates x 3 seeds, 5000 steps each)", cells=("rnn",),
        Ts=(40, 80), inits=("orthogonal", "identity")),
    "adding_truncation": _adding_sweep(
        "chapter 1: truncated backpropagation through time, the vanilla RNN at T = 20 with the "
        "gradient cut 2, 5, 10 or 20 (no cut) steps back (2 learning rates x 3 seeds, 5000 steps)",
        cells=("rnn",), Ts=(20,), truncates=(2, 5, 10, None)),
    "adding_truncation_first": _adding_sweep(
        "chapter 1: truncated backpropagation through time when the target is the first value "
        "alone (lag 10 to 19): the vanilla RNN at T = 20 with the gradient cut 5, 10 or 15 steps "
        "back, or not cut (2 learning rates x 3 seeds, 5000 steps)",
        cells=("rnn",), Ts=(20,), truncates=(5, 10, 15, None), target="first"),
    "segmenter_directions": dict(
        run=segmenter_run,
        configs=lambda: [dict(direction=d, lr=lr, seed=seed, steps=SEGMENTER["steps"],
                              eval_every=SEGMENTER["eval_every"])
                         for seed in SEGMENTER["seeds"] for lr in SEGMENTER["learning_rates"]
                         for d in ("bidirectional", "forward")],
        sources=(segmenter_run, rnn_experiments.train_segmenter, rnn_experiments.Segmenter,
                 rnn_experiments.unspaced, rnn_experiments.segmentation_scores, train.fit),
        config=lambda: {k: list(v) if isinstance(v, tuple) else v for k, v in SEGMENTER.items()},
        about="chapter 2: two stacked GRU layers, bidirectional (32 units) or forward only (52), "
              "put back the spaces of the text (2 learning rates x 3 seeds, 1000 steps each)"),
    "charlm_stateful": dict(
        run=charlm_stateful_run,
        configs=lambda: [dict(stateful=st, seed=seed) for seed in STATEFUL["seeds"] for st in (False, True)],
        sources=(charlm_stateful_run, recipes.train_char_lm, recipes.train_lm, recipes.stream_batches,
                 recipes._carried_state_loss, charlm.CharLM, train.fit, train.lm_heldout_loss),
        config=lambda: {k: list(v) if isinstance(v, tuple) else v for k, v in STATEFUL.items()},
        about="chapter 2: the LSTM trained on random windows or statefully (char-rnn), held-out "
              "loss with 64, 256 and 1024 characters of context (3 seeds, 3000 steps each)"),
    "charlm_cells": dict(
        run=charlm_run, configs=charlm_cells_configs,
        sources=(charlm_run, recipes.train_char_lm, recipes.train_lm, recipes.lm_loss,
                 charlm.CharLM, train.fit, train.lm_heldout_loss),
        config=lambda: {k: list(v) if isinstance(v, tuple) else v
                        for k, v in recipes.CHAR_LM_RECIPE.items()},
        about="chapter 2: RNN, GRU and LSTM language models (recipes.CHAR_LM_RECIPE): 3 cells x "
              "3 learning rates x 3 seeds, 3000 steps each, held-out loss every 100 steps "
              "(about 45 min on the 2-core machine with --jobs 2)"),
}


def _call(job):
    name, config = job
    return SWEEPS[name]["run"](**config)


def _matches(run, config):
    """Whether a finished run is the run of `config` (same value for every key of the config)."""
    return all(run.get(k, v if k == "eval_every" else None) == v for k, v in config.items())


def run_sweep(name, jobs=1):
    """Run every configuration of sweep `name` and write course_lib/sweeps/<name>.json."""
    sweep = SWEEPS[name]
    configs = sweep["configs"]()
    start = time.perf_counter()
    log = SWEEPS_DIR / f"{name}.partial.jsonl"  # progress: an interrupted sweep resumes from it
    runs = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    runs = [r for r in runs if any(_matches(r, c) for c in configs)]
    todo = [c for c in configs if not any(_matches(r, c) for r in runs)]
    print(f"{name}: {len(configs)} runs, {len(configs) - len(todo)} already in {log.name}")
    with ProcessPoolExecutor(jobs) as pool:
        for run in pool.map(_call, [(name, c) for c in todo]):
            runs.append(run)
            with open(log, "a") as f:
                f.write(json.dumps(run) + "\n")
            print(f"[{len(runs)}/{len(configs)}] {time.perf_counter() - start:6.0f} s  "
                  + json.dumps({k: v for k, v in run.items() if not isinstance(v, list)}), flush=True)
    config = sweep["config"]()
    result = {"name": name, "about": sweep["about"], "config": config,
              "fingerprint": fingerprint(*sweep["sources"], config=config),
              "torch": torch.__version__, "threads_per_run": 1, "jobs": jobs,
              "seconds": sum(r["seconds"] for r in runs), "runs": runs}
    path = SWEEPS_DIR / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    os.replace(tmp, path)
    log.unlink(missing_ok=True)
    print(f"wrote {path.relative_to(ROOT)} ({len(runs)} runs, {result['seconds']:.0f} s)")
    return result


# ---------------------------------------------------------------------------
# Records for benchmarks/results.json (benchmarks/bench_rnn.py)
# ---------------------------------------------------------------------------

def summary_records(args=None):
    """charlm_heldout_bpc/<cell>/<budget>: test bits per character, mean over seeds at the
    learning rate with the best mean validation loss at that budget; spread = [min, max]."""
    records = []
    if (SWEEPS_DIR / "charlm_cells.json").exists():
        table = summarise_charlm(load_sweep("charlm_cells"))
        for (cell, budget), row in sorted(table.items()):
            bpc = [nats / math.log(2) for nats in row["test"]]
            records.append({"name": f"charlm_heldout_bpc/{cell}/{budget}", "value": sum(bpc) / len(bpc),
                            "unit": "bpc", "baseline": None, "ratio": None,
                            "spread": [min(bpc), max(bpc)], "seeds": len(bpc), "lr": row["lr"]})
    return records


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", nargs="?", choices=sorted(SWEEPS))
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args(argv)
    if args.list or not args.name:
        for name, sweep in SWEEPS.items():
            print(f"{name}: {sweep['about']}")
        return 0
    run_sweep(args.name, args.jobs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
