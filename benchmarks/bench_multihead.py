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
        for name, module, call in order if i % 2 == 0 else order[::-1]:
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
    for name, call_theirs in [
        ("mha_fwd_bwd_vs_torch", with_weights),
        ("mha_fwd_bwd_vs_torch/fused_no_weights", fused),
    ]:
        ms_ours, ms_theirs = _compare((ours, call_ours), (theirs, call_theirs), x, grad_out, repeats)
        records.append(record(name, ms_ours, "ms", baseline=ms_theirs))
    return records


BENCHMARKS = [
    (
        "Multi-head attention: course_lib vs torch (self-attention, forward + backward incl. parameter "
        "gradients, CPU float32, B=32, T=128, d_model=256, h=8)",
        mha_fwd_bwd_vs_torch,
    ),
]


# --------------------------------------------------------------------------------------
# Sweep: one head against two on the chapter's three-lookups task, at a longer budget
# --------------------------------------------------------------------------------------
import torch.nn.functional as F  # noqa: E402
from common import SweepSpec  # noqa: E402

from course_lib.data import Vocab, copy_pairs  # noqa: E402
from course_lib.positional import LearnedPositionalEmbedding  # noqa: E402
from course_lib.train import fit, seed_everything  # noqa: E402

LETTERS, LOOKUP_T = "abcdefghijklmnopqrstuvwxyz", 9


class TinyAttentionModel(nn.Module):
    """The model of chapter 7 (same code): embeddings (+ learned positions) -> one multi-head
    attention layer whose values are the tokens alone -> MLP. logits (B, T, n_outputs, n_classes)."""

    def __init__(self, vocab_size, max_len, d_model, num_heads, n_outputs, n_classes):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = LearnedPositionalEmbedding(d_model, max_len)
        self.attn = MultiHeadAttention(d_model, num_heads)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 4 * d_model), nn.ReLU(), nn.Linear(4 * d_model, n_outputs * n_classes)
        )
        self.n_outputs, self.n_classes = n_outputs, n_classes

    def forward(self, x, mask=None):
        tokens = self.embed(x)
        where = self.pos(tokens)
        found, weights = self.attn(where, where, tokens, mask)
        logits = self.mlp(found)
        return logits.view(*x.shape, self.n_outputs, self.n_classes), weights


def three_lookups(n, seed, vocab):
    """Chapter 7's task: x (n, T) letters; y (n, T, 3) = mirror, previous, next (pad = none)."""
    pairs = copy_pairs(n, seed=seed, min_len=LOOKUP_T, max_len=LOOKUP_T, alphabet=LETTERS, reverse=True)
    x = torch.tensor([vocab.encode(s) for s, _ in pairs])
    mirror = torch.tensor([vocab.encode(r) for _, r in pairs])
    none = torch.full((n, 1), vocab.pad_id)
    previous = torch.cat([none, x[:, :-1]], 1)
    following = torch.cat([x[:, 1:], none], 1)
    return x, torch.stack([mirror, previous, following], -1)


def heads_lookup_run(point, seed, config):
    """One (heads, steps, seed), or (heads, steps, lr, seed): chapter 7's recipe (d_model 32, Adam
    at point["lr"] if the point has one, else config["lr"]; batches of 64 strings seeded
    1000 * seed + step); held-out accuracy per lookup and of the worst lookup on the test strings
    (seed 10_000). A point's lr is one of a grid chosen on validation: such a run also measures the
    worst lookup on 1000 other strings (seed 20_000), and one whose loss diverges counts as 0."""
    vocab = Vocab(LETTERS)
    x_test, y_test = three_lookups(1000, 10_000, vocab)
    tuned = "lr" in point
    seed_everything(seed)
    model = TinyAttentionModel(
        len(vocab),
        LOOKUP_T,
        d_model=config["d_model"],
        num_heads=point["heads"],
        n_outputs=3,
        n_classes=len(vocab),
    )

    def loss(m, batch):
        x, y = batch
        return F.cross_entropy(m(x)[0].flatten(0, 2), y.flatten())

    try:
        fit(
            model,
            loss,
            lambda step: three_lookups(64, 1000 * seed + step, vocab),
            steps=point["steps"],
            lr=point["lr"] if tuned else config["lr"],
            progress=False,
        )
    except FloatingPointError:  # the loss diverged
        if not tuned:
            raise
        return {"worst": 0.0, "val_worst": 0.0, "mirror": 0.0, "previous": 0.0, "next": 0.0}
    model.eval()
    acc = lookup_accuracy(model, x_test, y_test)  # (3,)
    val = lookup_accuracy(model, *three_lookups(1000, 20_000, vocab)) if tuned else None
    return {
        "worst": acc.min().item(),
        **({"val_worst": val.min().item()} if tuned else {}),
        "mirror": acc[0].item(),
        "previous": acc[1].item(),
        "next": acc[2].item(),
    }


def lookup_accuracy(model, x, y):
    """Accuracy of each of the three lookups on the strings x (n, T), targets y (n, T, 3): (3,)."""
    with torch.no_grad():
        return (model(x)[0].argmax(-1) == y).float().mean(dim=(0, 1))


SWEEPS = {
    "heads_three_lookups": SweepSpec(
        title="Chapter 7: one head against two on the three-lookups task, by training budget",
        run=heads_lookup_run,
        points=[{"heads": h, "steps": s} for h in (1, 2) for s in (500, 2000)],
        config={"d_model": 32, "lr": 1e-2},
        smoke={"steps": 10},
        margins={"worst_two_vs_one_head": 0.03},
        metrics={
            m: {"unit": "accuracy", "higher_is_better": True} for m in ("worst", "mirror", "previous", "next")
        },
        seeds=[0, 1, 2],
        records=[("worst", "heads_three_lookups/h{heads}/{steps}")],
        description="Held-out accuracy (1000 strings) of the worst of the three lookups.",
    ),
}


# --------------------------------------------------------------------------------------
# Sweep: one head against two, each at its own best learning rate (chosen on validation)
# --------------------------------------------------------------------------------------
SWEEPS["heads_lr"] = SweepSpec(
    title="Chapter 7: one head against two on the three-lookups task, each at its own best learning "
    "rate (chosen on validation strings), at 500 and 2000 steps",
    run=heads_lookup_run,
    points=[
        {"heads": h, "steps": s, "lr": lr}
        for h in (1, 2)
        for s in (500, 2000)
        for lr in (1e-3, 3e-3, 1e-2, 3e-2)
    ],
    config={
        "d_model": 32,
        "selection": "per (heads, steps): the lr with the best mean val_worst over the seeds",
    },
    smoke={"steps": 10},
    margins={"worst_two_vs_one_head_tuned": 0.03},
    metrics={
        m: {"unit": "accuracy", "higher_is_better": True}
        for m in ("worst", "val_worst", "mirror", "previous", "next")
    },
    description="Held-out accuracy (test: the 1000 strings of heads_three_lookups; validation: 1000 "
    "others) of the worst of the three lookups, and per lookup on test. Adam, batches of 64. A run "
    "whose loss diverges (non-finite) counts as accuracy 0.",
)


# --------------------------------------------------------------------------------------
# Sweep: a decoder trained with and without the causal mask (chapter 7's cheating decoder)
# --------------------------------------------------------------------------------------
from course_lib.attention import causal_mask  # noqa: E402

REV_L, REV_LETTERS = 6, "abcdefghij"


def reversal(n, seed, vocab):
    """Chapter 7's decoder task. inputs (n, 2L): x, <bos>, y_1..y_(L-1); targets (n, 2L): the
    next token at each position, where y is x reversed."""
    pairs = copy_pairs(n, seed=seed, min_len=REV_L, max_len=REV_L, alphabet=REV_LETTERS, reverse=True)
    x = torch.tensor([vocab.encode(s) for s, _ in pairs])
    y = torch.tensor([vocab.encode(r) for _, r in pairs])
    seq = torch.cat([x, torch.full((n, 1), vocab.bos_id), y], 1)  # (n, 2L + 1)
    return seq[:, :-1], seq[:, 1:]


@torch.no_grad()
def greedy(model, inputs, causal):
    """Generate y_1..y_L one token at a time after x and <bos>, feeding back the argmax."""
    seq = inputs[:, : REV_L + 1]  # x and <bos>
    for _ in range(REV_L):
        mask = causal_mask(seq.shape[1]) if causal else None
        logits, _ = model(seq, mask)
        seq = torch.cat([seq, logits[:, -1, 0].argmax(-1, keepdim=True)], 1)
    return seq[:, REV_L + 1 :]  # (n, L)


def decoder_mask_run(point, seed, config):
    """One (causal, seed): chapter 7's decoder (TinyAttentionModel, 2 heads, d_model 32) trained as
    a language model on batches seeded 1000 * seed + step, with or without the causal mask; on
    1000 held-out sequences: teacher-forced and greedy accuracy of the y half, and where the
    rows <bos>, y_1..y_(L-1) put their weight (the mirrored source letter, the next position)."""
    vocab = Vocab(REV_LETTERS)
    inputs, targets = reversal(1000, 10_000, vocab)
    causal, L = point["causal"], REV_L
    seed_everything(seed)
    model = TinyAttentionModel(len(vocab), 2 * L, d_model=32, num_heads=2, n_outputs=1, n_classes=len(vocab))
    mask = causal_mask(2 * L) if causal else None

    def loss(m, batch):
        x, y = batch
        return F.cross_entropy(m(x, mask)[0].flatten(0, 2), y.flatten())

    fit(
        model,
        loss,
        lambda step: reversal(64, 1000 * seed + step, vocab),
        steps=config["steps"],
        lr=config["lr"],
        progress=False,
    )
    model.eval()
    with torch.no_grad():
        logits, w = model(inputs, mask)
    teacher_forced = logits[:, L:, 0].argmax(-1)
    generated = greedy(model, inputs, causal)
    y = targets[:, L:]
    w = w.mean(1)  # (n, 2L, 2L), mean of the heads
    rows = torch.arange(L, 2 * L - 1)  # <bos>, y_1 .. y_(L-1): a next key exists
    return {
        "teacher_forced_token": (teacher_forced == y).float().mean().item(),
        "teacher_forced_exact": (teacher_forced == y).all(1).float().mean().item(),
        "greedy_token": (generated == y).float().mean().item(),
        "greedy_exact": (generated == y).all(1).float().mean().item(),
        "weight_mirrored_source": w[:, rows, 2 * L - 1 - rows].mean().item(),
        "weight_next_position": w[:, rows, rows + 1].mean().item(),
    }


SWEEPS["decoder_mask"] = SweepSpec(
    title="Chapter 7: a decoder trained with and without the causal mask, teacher-forced and greedy",
    run=decoder_mask_run,
    points=[{"causal": False}, {"causal": True}],
    config={"steps": 400, "lr": 3e-3},
    smoke={"steps": 10},
    margins={"greedy_exact_causal_vs_no_mask": 0.3, "teacher_forced_vs_greedy_no_mask": 0.3},
    metrics={
        **{
            m: {"unit": "accuracy", "higher_is_better": True}
            for m in ("teacher_forced_token", "teacher_forced_exact", "greedy_token", "greedy_exact")
        },
        "weight_mirrored_source": {"unit": "attention weight", "higher_is_better": True},
        "weight_next_position": {"unit": "attention weight", "higher_is_better": False},
    },
    description="Reverse 6 letters of a..j with one attention layer read as a language model; 1000 "
    "held-out sequences. Adam 3e-3, 400 steps of 64 sequences.",
)
