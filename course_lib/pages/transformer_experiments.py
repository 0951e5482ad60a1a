"""Chapter 9's experiments, one definition for the page and its sweeps.

The page runs seed 0 of each experiment; `benchmarks/bench_transformer.py` runs the same
functions over three seeds and commits the results, so that the page's run and the sweep's run
of the same seed are one computation.

The layer-norm test bed (post-LN against pre-LN, with and without a warm-up):
    Labeller(norm_first, layers)                 an encoder stack that labels every position
    reversal_batches(seed), labelling_loss       its task: reverse 8 random tokens (fresh batches)
    init_gradient_norms(norm_first, layers, seed)   each layer's gradient norm at initialisation
    train_labeller(norm_first, lr, warmup, seed, layers)   -> the final training loss

The chapter's encoder-decoder (2 + 2 layers, d_model 64) on its two tasks:
    date_task(), reversal_task()                 training, validation and held-out pairs
    train_model(task, seed, steps, ...)          `transformer_train.train_transformer`, seeded
    exact_match(model, task, pairs)              greedy exact match

What the trained model's heads do, and what each layer's output already knows:
    head_patterns(model, task, pairs)            weight on the previous token, on delimiters, and
                                                 on the source digit being copied, per head
    head_ablation(model, task, pairs, method)    exact match with one head removed, per head
    logit_lens(model, task, pairs)               next-token accuracy read after each decoder layer
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .. import data, train, transformer_train
from .ablation import mean_head, zero_head
from ..attention import causal_mask
from ..transformer import Encoder, Transformer, TransformerConfig, greedy_decode

__all__ = ["Labeller", "reversal_batches", "labelling_loss", "init_gradient_norms", "train_labeller",
           "Task", "date_task", "reversal_task", "train_model", "exact_match", "DELIMITERS",
           "head_patterns", "ATTENTIONS", "attentions", "head_means", "head_ablation", "logit_lens"]


# ---------------------------------------------------------------------------
# 1. The layer-norm test bed
# ---------------------------------------------------------------------------

VOCAB, LENGTH, WIDTH = 16, 8, 32


class Labeller(nn.Module):
    """Token and learned position embeddings -> `layers` encoder layers -> a linear read-out at
    every position: (B, T) ids -> (B, T, vocab) logits. d_model 32, 4 heads, d_ff 64, no dropout.

    Post-LN (norm_first=False) as in the paper: no norm after the stack, the last layer's own
    norm is the last operation. Pre-LN: a final norm before the read-out (Xiong et al., 2020).
    """

    def __init__(self, norm_first, layers=4, vocab=VOCAB, length=LENGTH, d=WIDTH):
        super().__init__()
        self.embed, self.pos = nn.Embedding(vocab, d), nn.Embedding(length, d)
        self.encoder = Encoder(layers, d, 4, 2 * d, dropout=0.0, norm_first=norm_first,
                               final_norm=norm_first)
        self.out = nn.Linear(d, vocab)

    def forward(self, x):                                        # (B, T) -> (B, T, vocab)
        return self.out(self.encoder(self.embed(x) + self.pos.weight))


def reversal_batches(seed, batch_size=32):
    """step -> (x, y): `batch_size` fresh sequences of 8 random tokens and their reversal, so
    the training loss is also a held-out loss."""
    g = torch.Generator().manual_seed(seed)

    def batch(step):
        x = torch.randint(0, VOCAB, (batch_size, LENGTH), generator=g)   # (B, T)
        return x, x.flip(1)
    return batch


def labelling_loss(model, batch):
    """Mean cross-entropy over every position, in nats (chance: ln 16)."""
    x, y = batch
    return F.cross_entropy(model(x).flatten(0, 1), y.flatten())


def init_gradient_norms(norm_first, layers, seed):
    """The gradient at initialisation (seed `seed`, one batch of 32) of each layer's parameters.

    -> {"layer": [||dL/dθ_l|| for every layer l], "ffn": [||dL/dW2_l|| for every layer l]}:
    W2 is the FFN's second weight matrix, the parameter of Xiong et al.'s Theorem 1.
    """
    train.seed_everything(seed)
    model = Labeller(norm_first, layers)
    labelling_loss(model, reversal_batches(100)(0)).backward()
    return {"layer": [torch.cat([p.grad.flatten() for p in layer.parameters()]).norm().item()
                      for layer in model.encoder.layers],
            "ffn": [layer.linear2.weight.grad.norm().item() for layer in model.encoder.layers]}


def train_labeller(norm_first, lr, warmup, seed, layers=4, steps=80):
    """Adam at peak rate `lr`, no gradient clipping; warmup > 0: the paper's inverse-square-root
    shape (`transformer_train.inverse_sqrt_warmup`: linear rise over `warmup` steps, then 1/sqrt(step)).
    -> the mean training loss of the last 10 steps (inf if the loss overflowed)."""
    train.seed_everything(seed)
    model = Labeller(norm_first, layers)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    scheduler = transformer_train.inverse_sqrt_warmup(optimizer, warmup) if warmup else None
    try:
        history = train.fit(model, labelling_loss, reversal_batches(seed), steps=steps,
                            optimizer=optimizer, scheduler=scheduler, clip=None, progress=False)
    except FloatingPointError:                                  # the loss became inf or NaN
        return math.inf
    last = history.train_loss[-10:]
    return sum(last) / len(last)


# ---------------------------------------------------------------------------
# 2. The chapter's encoder-decoder on dates and on reversal
# ---------------------------------------------------------------------------

@dataclass
class Task:
    """Training, validation and held-out (source, target) pairs; no validation or held-out pair
    occurs in the training set, and no held-out pair in the validation set."""

    train: list
    val: list
    test: list
    src_vocab: data.Vocab
    tgt_vocab: data.Vocab
    max_len: int = 11                                           # the longest target, with <eos>


def _split(train_pairs, make, shared_vocab=False):
    seen = set(train_pairs)
    test = [p for p in make(1100, 1) if p not in seen][:1000]
    val = [p for p in make(600, 2) if p not in seen and p not in set(test)][:500]
    src_vocab = data.Vocab.from_text([s for s, _ in train_pairs])
    tgt_vocab = src_vocab if shared_vocab else data.Vocab.from_text([t for _, t in train_pairs])
    return Task(train_pairs, val, test, src_vocab, tgt_vocab)


def date_task():
    """12000 training dates (seed 0), 500 validation (seed 2), 1000 held-out (seed 1)."""
    return _split(data.date_pairs(12000, seed=0), lambda n, seed: data.date_pairs(n, seed=seed))


def reversal_task():
    """10000 random strings of 1 to 10 letters and their reversal (seed 0); held-out strings from
    seed 1 (887 once those in the training set are dropped), validation from seed 2."""
    def make(n, seed):
        return data.copy_pairs(n, seed=seed, max_len=10, reverse=True)
    return _split(make(10000, 0), make, shared_vocab=True)


def train_model(task, seed, steps, lr=3e-3, warmup=0.1, progress=False, **recipe):
    """Chapter 9's model (2 + 2 layers, d_model 64, 4 heads, d_ff 128, no dropout), initialised
    from `seed` and trained by `transformer_train.train_transformer` (TRANSFORMER_RECIPE with lr, warmup
    and the fields in `recipe` replaced).
    -> (the model in eval mode, its training History)."""
    train.seed_everything(seed)
    model = Transformer(TransformerConfig(len(task.src_vocab), len(task.tgt_vocab), d_model=64,
                                          num_heads=4, d_ff=128, dropout=0.0))
    recipe = dataclasses.replace(transformer_train.TRANSFORMER_RECIPE, lr=lr, warmup=warmup, **recipe)
    history = transformer_train.train_transformer(model, task.train, task.src_vocab, task.tgt_vocab, steps,
                                        recipe, seed=seed, progress=progress,
                                        desc="training" if progress else None)
    return model.eval(), history


def exact_match(model, task, pairs):
    """Greedy decoding's exact match on `pairs` (all decoded in one batch)."""
    src = data.encode_pairs(pairs, task.src_vocab, task.tgt_vocab)["src"]
    out = greedy_decode(model, src, task.max_len, task.tgt_vocab.bos_id, task.tgt_vocab.eos_id)
    return train.exact_match([task.tgt_vocab.decode(row) for row in out], [t for _, t in pairs])


# ---------------------------------------------------------------------------
# 3. Inside the trained date model
# ---------------------------------------------------------------------------

DELIMITERS = set(" ,./-")


@torch.no_grad()
def head_patterns(model, task, pairs):
    """Three weight patterns of every head, averaged over `pairs` (one example at a time):

        previous   (L, h) encoder: mean weight of a query on the token just before it
        delimiter  (L, h) encoder: mean total weight on the delimiters (space , . / -)
        copy       (L, h) cross-attention: the weight of the query that writes digit k of the
                   year on the source character it copies (examples whose source spells the year)
        uniform, delimiter_share: what attention spread evenly would put on one token, and on
                   the delimiters; n_copy: the number of examples with the year spelt out
    """
    layers, heads = len(model.encoder.layers), model.encoder.layers[0].self_attn.num_heads
    previous, delimiter, copy = (torch.zeros(layers, heads) for _ in range(3))
    uniform = delimiter_share = 0.0
    n_copy = 0
    for s, t in pairs:
        model(torch.tensor([task.src_vocab.encode(s)]), torch.tensor([task.tgt_vocab.encode(t, bos=True)]))
        weights = model.attention_weights()
        is_delim = torch.tensor([c in DELIMITERS for c in s])
        for layer, w in enumerate(weights["encoder"]):          # w: (1, h, S, S)
            previous[layer] += w[0].diagonal(-1, -2, -1).mean(-1)
            delimiter[layer] += w[0][..., is_delim].sum(-1).mean(-1)
        uniform += 1 / len(s)
        delimiter_share += is_delim.float().mean().item()
        year_at = s.rfind(t[:4])                                # -1: the year is not spelt out
        if year_at >= 0:
            n_copy += 1
            for layer, w in enumerate(weights["cross"]):        # w: (1, h, T, S); query k writes digit k
                copy[layer] += torch.stack([w[0, :, k, year_at + k] for k in range(4)], -1).mean(-1)
    n = len(pairs)
    return {"previous": previous / n, "delimiter": delimiter / n, "copy": copy / max(n_copy, 1),
            "uniform": uniform / n, "delimiter_share": delimiter_share / n, "n_copy": n_copy}


ATTENTIONS = ("encoder self-attention", "decoder masked self-attention", "cross-attention")


def attentions(model):
    """{kind: [the MultiHeadAttention of each layer]} for the three kinds of ATTENTIONS."""
    return {ATTENTIONS[0]: [layer.self_attn for layer in model.encoder.layers],
            ATTENTIONS[1]: [layer.self_attn for layer in model.decoder.layers],
            ATTENTIONS[2]: [layer.multihead_attn for layer in model.decoder.layers]}


@torch.no_grad()
def head_means(model, task, pairs):
    """Each attention's mean output per head: {kind: [(h * d_k,) per layer]}, the input of W^O
    averaged over the real (not padded) query positions of `pairs`, read teacher-forced."""
    batch = data.encode_pairs(pairs, task.src_vocab, task.tgt_vocab)
    real = {ATTENTIONS[0]: batch["src"] != task.src_vocab.pad_id,
            ATTENTIONS[1]: batch["tgt_in"] != task.tgt_vocab.pad_id}
    real[ATTENTIONS[2]] = real[ATTENTIONS[1]]                   # cross-attention's queries: the target
    means, handles = {kind: [] for kind in ATTENTIONS}, []
    for kind, modules in attentions(model).items():
        for attention in modules:
            def record(module, args, kind=kind):
                means[kind].append(args[0][real[kind]].mean(0))   # (B, T, h * d_k) -> (h * d_k,)
            handles.append(attention.out_proj.register_forward_pre_hook(record))
    model(batch["src"], batch["tgt_in"])
    for handle in handles:
        handle.remove()
    return means


def head_ablation(model, task, pairs, method="zero", means=None):
    """Greedy exact match on `pairs` with one head removed at a time, for every head:
    {kind: (L, h) tensor}. method="zero": its output set to zero (`ablation.zero_head`, as
    Michel et al., 2019, mask heads); "mean": set to its mean output (`head_means`, computed on
    other pairs), which keeps the average signal and removes what depends on the input."""
    if method not in ("zero", "mean"):
        raise ValueError(f"method must be 'zero' or 'mean', got {method!r}")
    result = {}
    for kind, modules in attentions(model).items():
        result[kind] = torch.zeros(len(modules), modules[0].num_heads)
        for layer, attention in enumerate(modules):
            for head in range(attention.num_heads):
                if method == "zero":
                    handle = zero_head(attention, head)
                else:
                    handle = mean_head(attention, head, means[kind][layer])
                result[kind][layer, head] = exact_match(model, task, pairs)
                handle.remove()
    return result


@torch.no_grad()
def logit_lens(model, task, pairs):
    """The decoder's final norm and output layer applied to the residual stream after the
    embeddings and after each decoder layer (teacher-forced) -> the fraction of next tokens
    right at each depth: [after the embeddings, after layer 1, ...]."""
    batch = data.encode_pairs(pairs, task.src_vocab, task.tgt_vocab)
    src, tgt_in, tgt_out = batch["src"], batch["tgt_in"], batch["tgt_out"]
    memory = model.encode(src)                                  # (B, S, d)
    stream = model.embed(model.tgt_embed, tgt_in)               # the residual stream: (B, T, d)
    self_mask, memory_mask = causal_mask(tgt_in.shape[1]), model.src_mask(src)
    real = tgt_out != task.tgt_vocab.pad_id
    readout = []
    for depth in range(len(model.decoder.layers) + 1):
        if depth > 0:                                           # each layer adds to the stream
            stream = model.decoder.layers[depth - 1](stream, memory, self_mask, memory_mask)
        logits = model.out(model.decoder.norm(stream))          # the model's own read-out
        readout.append((logits.argmax(-1) == tgt_out)[real].float().mean().item())
    return readout
