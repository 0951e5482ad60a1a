"""The masked language model of chapter 10 (BERT-style, `course_lib.mlm`) as a committed sweep.

The model has the capstone GPT's shape; it is trained by `mlm.train_mlm` on the same corpus and
tested on a fixed held-out set: the first 256 windows of 64 characters of the validation text
with 15 % of their positions masked. The two count baselines need no seeds: they are printed by
the chapter, and recorded here beside the model for the README table.
"""

import dataclasses

import torch
from common import SweepSpec, record

from course_lib import data, mlm, train

SHAPE = {"d_model": 128, "num_heads": 4, "num_layers": 4, "d_ff": 512, "max_len": 64}


def mlm_run(point, seed, config):
    """One (steps, rate, seed): held-out masked-token accuracy, and the two baselines'."""
    torch.set_num_threads(1)
    corpus = data.char_corpus()
    V = len(corpus.vocab)
    x, inputs, targets = mlm.heldout_masked(corpus.val, 64, 256, mask_id=V)
    torch.manual_seed(seed)
    model = mlm.MaskedLM(V, **SHAPE)
    mlm.train_mlm(
        model,
        corpus,
        point["steps"],
        dataclasses.replace(train.GPT_RECIPE, batch_size=config["batch_size"], lr=config["lr"]),
        rate=point["rate"],
        seed=seed,
        progress=False,
    )
    model.eval()
    chosen = targets[targets != mlm.IGNORE]
    sentence = torch.tensor([corpus.vocab.encode(config["sentence"])])  # (1, T)
    gaps = sentence.clone()
    gaps[0, config["gaps"]] = model.mask_id
    with torch.no_grad():
        fills = model(gaps)[0, config["gaps"]].argmax(-1)  # (number of gaps,)
    return {
        "accuracy": mlm.masked_accuracy(model, inputs, targets),
        "unigram": (chosen == mlm.unigram_guess(corpus.train, V)).float().mean().item(),
        "neighbours": mlm.masked_accuracy(mlm.NeighbourBaseline(corpus.train, V), x, targets),
        **{f"fill_{i}": float(c) for i, c in enumerate(fills.tolist())},
    }


SENTENCE = "The return value of the function is a list of strings."
GAPS = [4, 11, 17, 24, 29, 38, 47, 52]


SWEEPS = {
    "mlm_capstone": SweepSpec(
        title="Chapter 10: a BERT-style masked language model of the capstone GPT's shape, "
        "masked-token accuracy on held-out text after 100 and 1600 steps",
        run=mlm_run,
        points=[{"steps": s, "rate": 0.4} for s in (100, 1600)],
        config={"batch_size": 32, "lr": 3e-3, "sentence": SENTENCE, "gaps": GAPS},
        smoke={"steps": 8},
        metrics={
            **{
                name: {"unit": "fraction of masked characters", "higher_is_better": True}
                for name in ("accuracy", "unigram", "neighbours")
            },
            **{f"fill_{i}": {"unit": "character id", "higher_is_better": True} for i in range(len(GAPS))},
        },
        margins={"above_count_model": 0.1},
        records=[("accuracy", "mlm_masked_accuracy/{steps}")],
        description="Trained with mlm.train_mlm (40 % of the positions chosen, BERT's 80/10/10 "
        "corruption; AdamW 3e-3 with warm-up and cosine decay; batches of 32 windows of 64 "
        "characters), tested on 256 held-out windows with 15 % of the positions masked. fill_i: the "
        "model's most likely character (its id in the corpus vocabulary) at the i-th of eight gaps "
        "(config 'gaps') in the sentence of config 'sentence', all eight masked at once: the fills "
        "the chapter shows. Margin 'above_count_model': how far (in masked-token accuracy) every seed of "
        "the longer budget must beat the count model that reads both neighbours for the chapter to "
        "say the network uses more context than that. 3 seeds.",
    ),
}


def mlm_headline(args):
    """mlm_masked_accuracy: the masked LM's held-out masked-token accuracy at the sweep's longest
    budget (mean of 3 seeds, read from the committed sweep: nothing is trained here); baseline:
    the count model that reads both neighbours."""
    from course_lib.pages.sweeps import load_sweep

    sweep = load_sweep("mlm_capstone")
    point = max(sweep.points, key=lambda p: p["steps"])
    s = sweep.summary("accuracy", **point)
    neighbours = sweep.summary("neighbours", **point).mean
    return [
        record(
            "mlm_masked_accuracy",
            s.mean,
            "fraction",
            baseline=neighbours,
            steps=point["steps"],
            std=s.std,
            min=s.min,
            max=s.max,
            n=s.n,
        )
    ]


BENCHMARKS = [("Masked language model (chapter 10), from the committed sweep", mlm_headline)]
