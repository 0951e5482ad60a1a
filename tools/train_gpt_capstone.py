"""Train chapter 10's capstone GPT once, seeded, and save its weights for the browser explorer.

    python tools/train_gpt_capstone.py            # writes course_lib/static/gpt_capstone.pt

The recipe is the page's own (book/10_capstone_lstm_to_gpt.ipynb, the cell that trains `gpt`):
`GPT(GPTConfig(V))` (nanoGPT's quick CPU run: 4 blocks, 4 heads, width 128, context 64, no biases,
tied embedding) on `data.char_corpus()`, seeded with `torch.manual_seed(0)` before it is built,
trained by `train.train_lm` with `train.GPT_RECIPE` at the peak learning rate the chapter
chooses (0.004, the sweep gpt_capstone's best tied rate on validation) for the sweep's 1750 steps,
batch order seed 0, on two torch threads as the page and the sweep train it, under the pinned
kernels of kernels.env (set here before torch is imported). On another CPU, another thread count
or other kernels the weights differ in their last bits and the run ends elsewhere: the file, not
this script, is what the explorer and its tests read. The script prints the held-out bits per
character next to the sweep's seed 0, so a reader sees whether their run reproduced it.

The file holds {"config": GPTConfig's fields, "state_dict": float32 tensors, "vocab": the
characters of the vocabulary in id order, "val_bpc", "test_bpc", "steps", "lr", "threads"}.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import kernels  # noqa: E402  (benchmarks/kernels.py: pins the CPU kernels before torch starts)

kernels.pin()
# Threads waiting for work sleep instead of spinning: the same sums in the same order, but on a
# machine shared with other jobs a spinning thread steals its partner's core (measured here under
# load: 4.3 s a step spinning, 0.38 s sleeping).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

from course_lib import data, train  # noqa: E402
from course_lib.gpt import GPT, GPTConfig  # noqa: E402
from course_lib.pages.sweeps import load_sweep  # noqa: E402

WEIGHTS = ROOT / "course_lib" / "static" / "gpt_capstone.pt"
STEPS, LR, SEED, THREADS, EVAL_LEN = 1750, 4e-3, 0, 2, 64  # the page's run (sweep gpt_capstone)


def train_capstone(steps=STEPS, lr=LR, seed=SEED, threads=THREADS):
    """-> (model, corpus, val_bpc, test_bpc): the page's GPT trained `steps` steps."""
    torch.set_num_threads(threads)
    corpus = data.char_corpus()
    torch.manual_seed(seed)
    model = GPT(GPTConfig(len(corpus.vocab)))
    recipe = dataclasses.replace(train.GPT_RECIPE, lr=lr)
    start = time.perf_counter()
    history = train.train_lm(
        model,
        corpus,
        steps,
        recipe,
        seed=seed,
        progress=False,
        eval_fn=lambda m: train.lm_heldout_loss(m, corpus.val, seq_len=EVAL_LEN),
    )
    print(f"trained {steps} steps in {time.perf_counter() - start:.0f} s on {threads} threads")
    model.eval()
    val_bpc = train.bits_per_char(history.evals[-1][1])
    test_bpc = train.bits_per_char(train.lm_heldout_loss(model, corpus.test, seq_len=EVAL_LEN))
    return model, corpus, val_bpc, test_bpc


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=WEIGHTS)
    parser.add_argument("--steps", type=int, default=STEPS)
    args = parser.parse_args(argv)
    model, corpus, val_bpc, test_bpc = train_capstone(args.steps)
    sweep = load_sweep("gpt_capstone")
    where = {"lr": LR, "steps": STEPS, "tie_weights": True}
    recorded = sweep.values("bpc", **where)[sweep.seeds.index(SEED)]
    print(
        f"validation bits per character {val_bpc:.6f} (sweep gpt_capstone, seed {SEED}: {recorded:.6f}); "
        f"test {test_bpc:.4f}"
    )
    vocab = list(corpus.vocab.itos)  # id -> character; id 0 is "<unk>"
    state = {name: t.detach().clone().contiguous() for name, t in model.state_dict().items()}
    torch.save(
        {
            "config": dataclasses.asdict(model.config),
            "state_dict": state,
            "vocab": vocab,
            "val_bpc": val_bpc,
            "test_bpc": test_bpc,
            "steps": args.steps,
            "lr": LR,
            "threads": THREADS,
        },
        args.out,
    )
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
