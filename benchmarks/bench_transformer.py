"""The Transformer: course_lib's model against torch.nn.Transformer, and the chapters' headline
results (dates exact match)."""

import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from common import record

from course_lib import data, recipes, train
from course_lib.ablation import without_ffn
from course_lib.attention import causal_mask
from course_lib.transformer import Transformer, greedy_decode


class TorchTransformer(nn.Module):
    """The same model as course_lib's Transformer around torch.nn.Transformer: same embeddings,
    positional encoding and output layer, the stacks from torch (post-LN, ReLU, batch_first)."""

    def __init__(self, ours):
        super().__init__()
        self.ours = ours  # shares the embeddings and the output layer
        d = ours.d_model
        self.body = nn.Transformer(
            d,
            ours.encoder.layers[0].self_attn.num_heads,
            len(ours.encoder.layers),
            len(ours.decoder.layers),
            ours.encoder.layers[0].linear1.out_features,
            dropout=0.0,
            batch_first=True,
        )
        self.body.encoder.load_state_dict(ours.encoder.state_dict())
        self.body.decoder.load_state_dict(ours.decoder.state_dict())

    def forward(self, src, tgt_in):
        o = self.ours
        pad = src == o.pad_id
        T = tgt_in.shape[1]
        h = self.body(
            o.embed(o.src_embed, src),
            o.embed(o.tgt_embed, tgt_in),
            tgt_mask=~causal_mask(T),
            src_key_padding_mask=pad,
            memory_key_padding_mask=pad,
        )
        return o.out(h)


def transformer_train_step_vs_torch(args):
    """One training step (forward + backward + Adam step), course_lib vs torch.nn.Transformer,
    same sizes and weights, CPU float32, batch 64 of dates (S <= 27, T = 11), d_model 64,
    4 heads, 2 + 2 layers, d_ff 128, dropout 0 (in training mode torch takes no fused fast path,
    so both run the same unfused operations; the difference is Python and our weights/masks)."""
    torch.manual_seed(0)
    pairs = data.date_pairs(64, seed=0)
    sv, tv = data.Vocab.from_text([s for s, _ in pairs]), data.Vocab.from_text([t for _, t in pairs])
    batch = data.encode_pairs(pairs, sv, tv)
    ours = Transformer(len(sv), len(tv), d_model=64, num_heads=4, d_ff=128, dropout=0.0)
    theirs = TorchTransformer(Transformer(len(sv), len(tv), d_model=64, num_heads=4, d_ff=128, dropout=0.0))
    runners = {}
    for name, model in (("ours", ours), ("torch", theirs)):
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)

        def step(model=model, opt=opt):
            start = time.perf_counter()
            logits = model(batch["src"], batch["tgt_in"])
            loss = F.cross_entropy(logits.flatten(0, 1), batch["tgt_out"].flatten(), ignore_index=0)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return (time.perf_counter() - start) * 1e3

        runners[name] = step
    times = {name: [] for name in runners}
    warmup, repeats = 3, 10 if args.quick else 40
    for i in range(warmup + repeats):
        for name in list(runners) if i % 2 == 0 else list(reversed(runners)):  # interleaved
            ms = runners[name]()
            if i >= warmup:
                times[name].append(ms)
    ms = {name: statistics.median(t) for name, t in times.items()}
    return [record("transformer_train_step_vs_torch", ms["ours"], "ms", baseline=ms["torch"])]


def transformer_dates_exact_match(args):
    """Chapter 9's date model and recipe (500 steps), held-out greedy exact match."""
    torch.set_num_threads(1)
    train.seed_everything(0)
    train_pairs = data.date_pairs(12000, seed=0)
    seen = set(train_pairs)
    test_pairs = [p for p in data.date_pairs(1100, seed=1) if p not in seen][:1000]
    sv = data.Vocab.from_text([s for s, _ in train_pairs])
    tv = data.Vocab.from_text([t for _, t in train_pairs])
    model = Transformer(len(sv), len(tv), d_model=64, num_heads=4, d_ff=128, dropout=0.0)
    history = recipes.train_transformer(model, train_pairs, sv, tv, steps=500, progress=False)
    out = greedy_decode(model, data.encode_pairs(test_pairs, sv, tv)["src"], 11, tv.bos_id, tv.eos_id)
    em = train.exact_match([tv.decode(r) for r in out], [t for _, t in test_pairs])
    return [
        record("transformer_dates_exact_match", em, "fraction"),
        record("transformer_dates_train_seconds", history.seconds, "s"),
    ]


BENCHMARKS = [
    (
        "Transformer: course_lib vs torch.nn.Transformer, one training step (CPU float32, B=64, dates, "
        "d_model=64, 4 heads, 2+2 layers)",
        transformer_train_step_vs_torch,
    ),
    ("Transformer on dates: held-out exact match (chapter 9's recipe)", transformer_dates_exact_match),
]


# ---------------------------------------------------------------------------
# Sweeps
# ---------------------------------------------------------------------------
from common import SweepSpec  # noqa: E402

# The paper's optimisation recipe (Vaswani et al., 2017, section 5.3 and 5.4) at chapter 9's size
# and peak rate, against the chapter's: Adam beta2 0.98 and eps 1e-9, the inverse-square-root
# shape (warm-up over the first tenth of the steps), label smoothing 0.1. Both clip to norm 1 and
# use no dropout; the peak learning rate is the chapter's (3e-3) in both.
PAPER_RECIPES = {
    "chapter": dict(schedule="one_cycle", betas=(0.9, 0.999), adam_eps=1e-8, label_smoothing=0.0),
    "paper": dict(schedule="inverse_sqrt", betas=(0.9, 0.98), adam_eps=1e-9, label_smoothing=0.1),
}


def _dates_split():
    train_pairs = data.date_pairs(12000, seed=0)
    seen = set(train_pairs)
    test_pairs = [p for p in data.date_pairs(1100, seed=1) if p not in seen][:1000]
    sv = data.Vocab.from_text([s for s, _ in train_pairs])
    tv = data.Vocab.from_text([t for _, t in train_pairs])
    return train_pairs, test_pairs, sv, tv


def _train_dates(seed, steps, lr, warmup, recipe, dropout=0.0, tied=False, ffn=True):
    """Chapter 9's date model trained by `train_transformer` from `seed`; `recipe`: the keyword
    arguments of the optimisation recipe. dropout: the model's (0 in the chapter); tied: the
    output layer shares the target embedding matrix; ffn=False: `ablation.without_ffn`.
    -> held-out greedy exact match, unsmoothed teacher-forced cross-entropy (nats per token)."""
    torch.set_num_threads(1)
    train_pairs, test_pairs, sv, tv = _dates_split()
    train.seed_everything(seed)
    model = Transformer(
        len(sv),
        len(tv),
        d_model=64,
        num_heads=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        d_ff=128,
        dropout=dropout,
    )
    if tied:
        model.out.weight = model.tgt_embed.weight  # one (V, d_model) matrix, used twice
    if not ffn:
        without_ffn(model)
    recipes.train_transformer(
        model, train_pairs, sv, tv, steps, lr=lr, warmup=warmup, seed=seed, progress=False, **recipe
    )
    model.eval()
    test = data.encode_pairs(test_pairs, sv, tv)
    with torch.no_grad():
        out = greedy_decode(model, test["src"], 11, tv.bos_id, tv.eos_id)
        nll = recipes.transformer_loss(
            model, {k: test[k] for k in ("src", "tgt_in", "tgt_out")}, pad_id=tv.pad_id
        ).item()
    em = train.exact_match([tv.decode(r) for r in out], [t for _, t in test_pairs])
    return {"exact_match": em, "heldout_nll": nll}


def paper_recipe_run(point, seed, config):
    """One (recipe, steps, seed): chapter 9's date model trained with the chapter's or the
    paper's optimisation recipe."""
    return _train_dates(seed, point["steps"], config["lr"], config["warmup"], PAPER_RECIPES[point["recipe"]])


# One change from the paper at a time, on top of the chapter's recipe (Vaswani et al., 2017,
# sections 3.4, 5.3 and 5.4), and the model without its FFNs (section 3.3).
ABLATIONS = {
    "chapter": {},
    "label_smoothing": {"recipe": {"label_smoothing": 0.1}},
    "inverse_sqrt": {"recipe": {"schedule": "inverse_sqrt"}},
    "adam_beta2": {"recipe": {"betas": (0.9, 0.98), "adam_eps": 1e-9}},
    "dropout": {"dropout": 0.1},
    "tied_output": {"tied": True},
    "no_ffn": {"ffn": False},
}


def ablation_run(point, seed, config):
    """One (component, steps, seed): the chapter's recipe with one of ABLATIONS applied."""
    change = dict(ABLATIONS[point["component"]])
    recipe = {**PAPER_RECIPES["chapter"], **change.pop("recipe", {})}
    return _train_dates(seed, point["steps"], config["lr"], config["warmup"], recipe, **change)


SWEEPS = {
    "transformer_paper_recipe": SweepSpec(
        title="Dates, chapter 9's model: the chapter's optimisation recipe (one-cycle, Adam "
        "defaults, no smoothing) against the paper's (inverse-sqrt warm-up, beta2 0.98, "
        "eps 1e-9, label smoothing 0.1), same peak lr, by budget",
        run=paper_recipe_run,
        points=[{"recipe": r, "steps": s} for r in ("chapter", "paper") for s in (150, 500)],
        config={"lr": 3e-3, "warmup": 0.1},
        smoke={"steps": 8},
        margins={"em_150": 0.02, "em_500": 0.01},
        metrics={
            "exact_match": {"unit": "fraction", "higher_is_better": True},
            "heldout_nll": {"unit": "nats/token", "higher_is_better": False},
        },
        seeds=[0, 1, 2],
        records=[("exact_match", "transformer_paper_recipe/{recipe}/{steps}")],
    ),
}

SWEEPS["paper_recipe_ablation"] = SweepSpec(
    title="Dates, chapter 9's model and recipe with one change from the paper at a time (label "
    "smoothing 0.1, the inverse-sqrt warm-up, beta2 0.98 and eps 1e-9, dropout 0.1, output layer "
    "tied to the target embedding) or without its FFNs, 500 steps",
    run=ablation_run,
    points=[{"component": c, "steps": 500} for c in ABLATIONS if c != "chapter"],
    config=SWEEPS["transformer_paper_recipe"].config,
    smoke={"steps": 8},
    margins={"em_dropout": 0.05, "nll_no_ffn": 0.0005},
    metrics=SWEEPS["transformer_paper_recipe"].metrics,
    seeds=[0, 1, 2],
    records=[("exact_match", "paper_recipe_ablation/{component}")],
    description="The baseline is transformer_paper_recipe's chapter recipe at 500 steps (same "
    "seeds, same code). Each point changes one thing: the optimisation settings of the paper one "
    "by one, dropout 0.1 (the model's, on every sub-layer and the embeddings), the output layer "
    "sharing the target embedding matrix (the vocabularies differ, so the source embedding "
    "cannot be shared too), or the model without FFNs (fewer parameters: the FFNs' are gone).",
)
