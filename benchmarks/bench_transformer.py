"""The Transformer: course_lib's model against torch.nn.Transformer, and the chapters' headline
results (dates exact match)."""

import dataclasses
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from common import record

from course_lib import data, train, transformer_train
from course_lib.attention import causal_mask
from course_lib.pages.ablation import without_ffn
from course_lib.transformer import Transformer, TransformerConfig, greedy_decode


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
    ours = Transformer(TransformerConfig(len(sv), len(tv), d_model=64, num_heads=4, d_ff=128, dropout=0.0))
    theirs = TorchTransformer(
        Transformer(TransformerConfig(len(sv), len(tv), d_model=64, num_heads=4, d_ff=128, dropout=0.0))
    )
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
    model = Transformer(TransformerConfig(len(sv), len(tv), d_model=64, num_heads=4, d_ff=128, dropout=0.0))
    history = transformer_train.train_transformer(model, train_pairs, sv, tv, steps=500, progress=False)
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

# The paper's optimisation recipe (Vaswani et al., 2017, section 5.3 and 5.4) at chapter 9's size,
# against the chapter's: Adam beta2 0.98 and eps 1e-9, the inverse-square-root shape (warm-up over
# the first tenth of the steps), label smoothing 0.1. Both clip to norm 1 and use no dropout;
# paper_recipe_lr tries each at three peak rates, paper_recipe_ablation applies one change at a time.
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
        TransformerConfig(len(sv), len(tv), d_model=64, num_heads=4, d_ff=128, dropout=dropout)
    )
    if tied:
        model.out.weight = model.tgt_embed.weight  # one (V, d_model) matrix, used twice
    if not ffn:
        without_ffn(model)
    recipe = dataclasses.replace(transformer_train.TRANSFORMER_RECIPE, lr=lr, warmup=warmup, **recipe)
    transformer_train.train_transformer(model, train_pairs, sv, tv, steps, recipe, seed=seed, progress=False)
    model.eval()
    test = data.encode_pairs(test_pairs, sv, tv)
    with torch.no_grad():
        out = greedy_decode(model, test["src"], 11, tv.bos_id, tv.eos_id)
        nll = transformer_train.transformer_loss(
            model, {k: test[k] for k in ("src", "tgt_in", "tgt_out")}, pad_id=tv.pad_id
        ).item()
    em = train.exact_match([tv.decode(r) for r in out], [t for _, t in test_pairs])
    return {"exact_match": em, "heldout_nll": nll}


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


SWEEPS = {}

SWEEPS["paper_recipe_ablation"] = SweepSpec(
    title="Dates, chapter 9's model and recipe with one change from the paper at a time (label "
    "smoothing 0.1, the inverse-sqrt warm-up, beta2 0.98 and eps 1e-9, dropout 0.1, output layer "
    "tied to the target embedding) or without its FFNs, 500 steps",
    run=ablation_run,
    points=[{"component": c, "steps": 500} for c in ABLATIONS if c != "chapter"],
    config={"lr": 3e-3, "warmup": 0.1},
    smoke={"steps": 8},
    margins={"em_dropout": 0.05, "nll_no_ffn": 0.0005},
    metrics={
        "exact_match": {"unit": "fraction", "higher_is_better": True},
        "heldout_nll": {"unit": "nats/token", "higher_is_better": False},
    },
    seeds=[0, 1, 2],
    records=[("exact_match", "paper_recipe_ablation/{component}")],
    description="The baseline is paper_recipe_lr's chapter recipe at 3e-3 (the same computation: "
    "same seeds and code). Each point changes one thing: the optimisation settings of the paper one "
    "by one, dropout 0.1 (the model's, on every sub-layer and the embeddings), the output layer "
    "sharing the target embedding matrix (the vocabularies differ, so the source embedding "
    "cannot be shared too), or the model without FFNs (fewer parameters: the FFNs' are gone).",
)


# ---------------------------------------------------------------------------
# Chapter 9's further sweeps: one definition with the page (course_lib.pages.transformer_experiments)
# ---------------------------------------------------------------------------
from course_lib.pages import transformer_experiments as TX  # noqa: E402
from course_lib.pages.ablation import zero_head  # noqa: E402


def ln_init_gradients_run(point, seed, config):
    """One (placement, depth, seed): each layer's gradient norm at initialisation, on one batch."""
    g = TX.init_gradient_norms(point["placement"] == "pre", point["layers"], seed)
    return {
        "layer_first": g["layer"][0],
        "layer_last": g["layer"][-1],
        "ffn_first": g["ffn"][0],
        "ffn_last": g["ffn"][-1],
    }


def ln_placement_run(point, seed, config):
    """One (placement, warm-up, depth, peak lr, seed): the test bed trained without clipping."""
    loss = TX.train_labeller(
        point["placement"] == "pre",
        point["lr"],
        point["warmup"],
        seed,
        layers=point["layers"],
        steps=config["steps"],
    )
    return {"final_loss": loss}


# Chapter 9's recipe, the paper's, and the paper's with an annealed schedule (the one-cycle
# cosine of the chapter's recipe in place of the inverse square root, which at 500 steps with a
# warm-up of 50 still runs at sqrt(50/500) = 0.32 of its peak at the last step).
RECIPES_BY_LR = {
    "chapter": PAPER_RECIPES["chapter"],
    "paper": PAPER_RECIPES["paper"],
    "paper_annealed": {**PAPER_RECIPES["paper"], "schedule": "one_cycle"},
}


def paper_recipe_lr_run(point, seed, config):
    """One (recipe, peak lr, seed): chapter 9's date model, validation and held-out results."""
    task = TX.date_task()
    model, _ = TX.train_model(
        task, seed, config["steps"], lr=point["lr"], warmup=config["warmup"], **RECIPES_BY_LR[point["recipe"]]
    )
    out = {}
    for split, pairs in (("val", task.val), ("test", task.test)):
        batch = data.encode_pairs(pairs, task.src_vocab, task.tgt_vocab)
        with torch.no_grad():
            nll = transformer_train.transformer_loss(model, batch, pad_id=task.tgt_vocab.pad_id).item()
        prefix = "" if split == "test" else "val_"
        out[f"{prefix}exact_match"] = TX.exact_match(model, task, pairs)
        out[f"{prefix}nll"] = nll
    return out


def reversal_run(point, seed, config):
    """One seed of chapter 9's model and recipe on string reversal: held-out exact match."""
    task = TX.reversal_task()
    model, _ = TX.train_model(task, seed, point["steps"])
    return {"exact_match": TX.exact_match(model, task, task.test)}


HEAD_KINDS = {"enc": TX.ATTENTIONS[0], "dec": TX.ATTENTIONS[1], "cross": TX.ATTENTIONS[2]}


def heads_run(point, seed, config):
    """One seed of chapter 9's date model (its recipe, 500 steps), then on the held-out dates:
    exact match; each head's weight patterns; exact match with each head zeroed, and with each
    head set to its mean output (means over 1000 training pairs); the last decoder layer's
    cross-attention heads zeroed together, and all but one; the logit lens."""
    task = TX.date_task()
    model, _ = TX.train_model(task, seed, point["steps"])
    pairs = task.test[: config["n_test"]]
    out = {"exact_match": TX.exact_match(model, task, pairs)}
    patterns = TX.head_patterns(model, task, pairs)
    out["uniform"], out["delimiter_share"] = patterns["uniform"], patterns["delimiter_share"]
    for name in ("previous", "delimiter", "copy"):
        for (layer, head), value in zip(_cells(patterns[name]), patterns[name].flatten().tolist()):
            out[f"{name}_l{layer}_h{head}"] = value
    means = TX.head_means(model, task, task.train[: config["n_means"]])
    for method in ("zero", "mean"):
        table = TX.head_ablation(model, task, pairs, method, means)
        for short, kind in HEAD_KINDS.items():
            for (layer, head), value in zip(_cells(table[kind]), table[kind].flatten().tolist()):
                out[f"{method}_{short}_l{layer}_h{head}"] = value
    cross = TX.attentions(model)[TX.ATTENTIONS[2]][-1]  # the last decoder layer's
    for keep in (None, *range(cross.num_heads)):
        handles = [zero_head(cross, h) for h in range(cross.num_heads) if h != keep]
        out["cross_last_all" if keep is None else f"cross_last_only_h{keep + 1}"] = TX.exact_match(
            model, task, pairs
        )
        for handle in handles:
            handle.remove()
    for depth, value in enumerate(TX.logit_lens(model, task, pairs)):
        out[f"lens_{depth}"] = value
    return out


def _cells(table):
    """(layer, head) numbered from 1, in the row-major order of an (L, h) table."""
    return [(layer + 1, head + 1) for layer in range(table.shape[0]) for head in range(table.shape[1])]


def _head_metrics():
    metrics = {
        "exact_match": {"unit": "fraction", "higher_is_better": True},
        "uniform": {"unit": "weight", "higher_is_better": True},
        "delimiter_share": {"unit": "weight", "higher_is_better": True},
    }
    for name in ("previous", "delimiter", "copy"):
        for layer, head in _cells(torch.zeros(2, 4)):
            metrics[f"{name}_l{layer}_h{head}"] = {"unit": "weight", "higher_is_better": True}
    for method in ("zero", "mean"):
        for short in HEAD_KINDS:
            for layer, head in _cells(torch.zeros(2, 4)):
                metrics[f"{method}_{short}_l{layer}_h{head}"] = {"unit": "fraction", "higher_is_better": True}
    metrics["cross_last_all"] = {"unit": "fraction", "higher_is_better": True}
    for head in range(1, 5):
        metrics[f"cross_last_only_h{head}"] = {"unit": "fraction", "higher_is_better": True}
    for depth in range(3):
        metrics[f"lens_{depth}"] = {"unit": "fraction", "higher_is_better": True}
    return metrics


SWEEPS["ln_init_gradients"] = SweepSpec(
    title="Chapter 9's layer-norm test bed at initialisation: the gradient norm of the first and "
    "the last layer's parameters (and of their FFN's W2), post-LN against pre-LN, by depth",
    run=ln_init_gradients_run,
    points=[{"placement": p, "layers": n} for p in ("post", "pre") for n in (1, 2, 4, 8, 16)],
    config={"batch": 32},
    smoke={"layers": 2},
    margins={"ratio_growth": 0.25, "post_profile_growth": 0.1},
    metrics={
        m: {"unit": "gradient norm", "higher_is_better": False}
        for m in ("layer_first", "layer_last", "ffn_first", "ffn_last")
    },
    description="Xiong et al. (2020, Theorem 1): at initialisation the gradient of the last "
    "layer's W2 is O(d sqrt(ln d)) for post-LN, whatever the depth N, and O(d sqrt(ln d / N)) "
    "for pre-LN, so post/pre grows like sqrt(N). Declared claims: the post/pre ratio of ffn_last "
    "grows from N = 1 to N = 16 by >= ratio_growth in every seed (paired); at N = 16 post-LN's "
    "last layer's gradient exceeds its first layer's by a factor >= 1 + post_profile_growth in "
    "every seed. The same batch (seed 100) for every model; seeds seed the initialisation.",
)

SWEEPS["ln_placement"] = SweepSpec(
    title="Chapter 9's layer-norm test bed trained: post-LN against pre-LN, without and with the "
    "inverse-square-root warm-up, by depth and peak learning rate (Adam, no clipping, 80 steps)",
    run=ln_placement_run,
    points=[
        {"placement": p, "warmup": 0, "layers": n, "lr": 3e-3} for p in ("post", "pre") for n in (2, 4, 8)
    ]
    + [
        {"placement": p, "warmup": w, "layers": n, "lr": 3e-2}
        for p in ("post", "pre")
        for w in (0, 20)
        for n in (2, 4, 8)
    ],
    config={"steps": 80, "batch": 32},
    smoke={"steps": 4},
    margins={"placement": 1.0, "warmup": 1.0},
    metrics={"final_loss": {"unit": "nats", "higher_is_better": False}},
    description="final_loss: the mean training loss of the last 10 of 80 steps (fresh random "
    "batches, so also a held-out loss; chance ln 16 = 2.77); inf if the loss overflowed. Declared "
    "claims (lr 3e-2, unpaired, worst seed against best): without warm-up pre-LN beats post-LN by "
    ">= placement nats where post-LN fails; the warm-up rescues post-LN by >= warmup nats where "
    "it does. lr 3e-3 without warm-up is the control (both placements are expected to train).",
)

SWEEPS["paper_recipe_lr"] = SweepSpec(
    title="Dates, chapter 9's model, 500 steps: the chapter's recipe, the paper's, and the paper's "
    "with the chapter's annealed schedule, each at three peak learning rates; the rate chosen on "
    "validation, reported on the held-out set",
    run=paper_recipe_lr_run,
    points=[{"recipe": r, "lr": lr} for r in RECIPES_BY_LR for lr in (1e-3, 3e-3, 1e-2)],
    config={"steps": 500, "warmup": 0.1},
    smoke={"steps": 8},
    margins={"em_best_lr": 0.01, "annealing": 0.01},
    metrics={
        "val_exact_match": {"unit": "fraction", "higher_is_better": True},
        "val_nll": {"unit": "nats/token", "higher_is_better": False},
        "exact_match": {"unit": "fraction", "higher_is_better": True},
        "nll": {"unit": "nats/token", "higher_is_better": False},
    },
    records=[("exact_match", "paper_recipe_lr/{recipe}/{lr}")],
    description="Each recipe's rate is the one with the highest mean validation exact match over "
    "the seeds (ties: the lower mean validation cross-entropy); its held-out results are the ones "
    "compared. nll: cross-entropy without smoothing. Declared claims (unpaired, each recipe at its "
    "chosen rate): the chapter's recipe beats the paper's by >= em_best_lr in held-out exact "
    "match; the annealed paper recipe beats the paper's by >= annealing.",
)

SWEEPS["transformer_reversal"] = SweepSpec(
    title="String reversal (1 to 10 letters), chapter 9's model and recipe, 250 steps: held-out exact match",
    run=reversal_run,
    points=[{"steps": 250}],
    config={},
    smoke={"steps": 8},
    margins={"em_floor": 0.99},
    metrics={"exact_match": {"unit": "fraction", "higher_is_better": True}},
    records=[("exact_match", "transformer_reversal_exact_match")],
    description="Declared claim: every seed reaches >= em_floor held-out exact match.",
)

SWEEPS["transformer_heads"] = SweepSpec(
    title="Dates, chapter 9's model and recipe (500 steps): each head's weight patterns, exact "
    "match with each head zeroed or mean-ablated, the last cross-attention heads together, and the "
    "logit lens, on 1000 held-out dates",
    run=heads_run,
    points=[{"steps": 500}],
    config={"n_test": 1000, "n_means": 1000},
    smoke={"steps": 8, "n_test": 20, "n_means": 20},
    margins={
        "em_floor": 0.99,
        "copy_over_uniform": 0.1,
        "delimiter_over_share": 0.1,
        "costliest_head": 0.1,
        "lens_gain": 0.05,
    },
    metrics=_head_metrics(),
    description="Layers and heads are numbered from 1 (enc: encoder self-attention; dec: decoder "
    "masked self-attention; cross: cross-attention). Mean ablation replaces a head's output by "
    "its mean over the real query positions of 1000 training pairs. Declared claims (per seed, "
    "paired): exact match >= em_floor; every last-layer cross head puts >= copy_over_uniform more "
    "weight on the copied digit than uniform attention would; the best delimiter head puts >= "
    "delimiter_over_share more than the delimiters' share; the costliest head (zeroed) costs >= "
    "costliest_head of exact match; each decoder layer raises the logit lens's accuracy by >= "
    "lens_gain. exact_match is paper_recipe_lr's chapter/3e-3 (same computation).",
)
