"""A small masked language model in the style of BERT (Devlin et al., 2019), and two baselines.

An encoder-only model sees every position of its window (no mask in the attention) and is
trained to fill in characters hidden from it. BERT's recipe: choose 15 % of the positions; of
those, replace 80 % by a [MASK] token, 10 % by a random token and leave 10 % unchanged; predict
the original token at the chosen positions only:

    loss = mean over chosen t of  -log p(x_t | x with the chosen positions corrupted)

The model is `GPT`'s stack without the causal mask: token and learned position embeddings,
pre-LN `EncoderLayer`s, a final LayerNorm and an output layer. Its vocabulary has one extra
id, `mask_id = vocab_size`, which it reads but never predicts.

Its training recipe is `train_mlm` (the optimiser and schedule of `train.GPT_RECIPE`).

Baselines for masked-token accuracy: the most frequent character (`unigram_guess`), and the
character seen most often between the same left and right neighbours in the training text
(`NeighbourBaseline`), a count model that uses one character of context on each side.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import data
from ._checks import check_ids, check_int
from .positional import LearnedPositionalEmbedding
from .train import GPT_RECIPE, fit, lm_optimizer
from .transformer import EncoderLayer

__all__ = ["MaskedLM", "mask_tokens", "mlm_loss", "masked_accuracy", "heldout_masked",
           "unigram_guess", "NeighbourBaseline", "IGNORE", "train_mlm"]

IGNORE = -100  # the target of a position that is not predicted (F.cross_entropy's ignore_index)


class MaskedLM(nn.Module):
    """An encoder-only Transformer over characters: idx (B, T) -> logits (B, T, vocab_size).

    idx may hold the ids 0..vocab_size-1 and `mask_id` (= vocab_size)."""

    def __init__(self, vocab_size, d_model=64, num_heads=4, num_layers=2, d_ff=256, max_len=256,
                 dropout=0.0, activation="gelu"):
        super().__init__()
        self.vocab_size = check_int("vocab_size", vocab_size)
        self.mask_id = vocab_size
        self.max_len = check_int("max_len", max_len)
        self.token_embed = nn.Embedding(vocab_size + 1, d_model)      # + the [MASK] token
        self.position = LearnedPositionalEmbedding(d_model, max_len, dropout)
        self.blocks = nn.ModuleList(
            EncoderLayer(d_model, num_heads, d_ff, dropout, activation, norm_first=True)
            for _ in range(check_int("num_layers", num_layers)))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)
        nn.init.normal_(self.token_embed.weight, std=0.02)

    def forward(self, idx):
        check_ids("idx", idx, self.vocab_size + 1, self.max_len)
        h = self.position(self.token_embed(idx))                       # (B, T, d)
        for block in self.blocks:
            h = block._forward(h)                                      # no mask: both sides
        return self.head(self.norm(h))                                 # (B, T, V)


def mask_tokens(x, mask_id, rate=0.15, generator=None, keep_random=True):
    """BERT's corruption of x (B, T): choose each position with probability `rate`; a chosen
    position becomes mask_id (80 %), a random id below mask_id (10 %) or stays (10 %).
    keep_random=False masks every chosen position (the fill-in-the-blank test).

    -> (inputs (B, T), targets (B, T)): targets hold x at the chosen positions, IGNORE elsewhere.
    """
    if not 0 < rate <= 1:
        raise ValueError(f"rate must be in (0, 1], got {rate}")
    chosen = torch.rand(x.shape, generator=generator) < rate
    targets = torch.where(chosen, x, torch.full_like(x, IGNORE))
    u = torch.rand(x.shape, generator=generator) if keep_random else torch.zeros(x.shape)
    random_ids = torch.randint(0, mask_id, x.shape, generator=generator)
    inputs = torch.where(chosen & (u < 0.8), torch.full_like(x, mask_id), x)
    inputs = torch.where(chosen & (u >= 0.8) & (u < 0.9), random_ids, inputs)
    return inputs, targets


def mlm_loss(model, batch):
    """Mean cross-entropy at the chosen positions, in nats: batch = (inputs, targets)."""
    inputs, targets = batch
    return F.cross_entropy(model(inputs).flatten(0, 1), targets.flatten(), ignore_index=IGNORE)


def train_mlm(model, corpus, steps, recipe=GPT_RECIPE, *, rate=0.15, seed=0, eval_fn=None, eval_every=0,
              progress=True, desc="MLM"):
    """Train a MaskedLM BERT's way on random windows of corpus.train: every batch corrupted by
    `mask_tokens` (a new draw each step, a share `rate` of the positions), `mlm_loss`, with
    `recipe` (default GPT_RECIPE: AdamW with weight decay on the weight matrices only, a
    warm-up and a cosine decay to min_lr)."""
    check_int("steps", steps)
    g = torch.Generator().manual_seed(seed)
    optimizer, scheduler = lm_optimizer(model, recipe, steps)

    def batch(step):
        x, _ = data.lm_batch(corpus.train, recipe.batch_size, recipe.seq_len, g)   # (B, T); no targets
        return mask_tokens(x, model.mask_id, rate, g)
    return fit(model, mlm_loss, batch, steps=steps, optimizer=optimizer, scheduler=scheduler,
               clip=recipe.clip, eval_fn=eval_fn, eval_every=eval_every, progress=progress, desc=desc)


def heldout_masked(ids, seq_len, num_windows, mask_id, rate=0.15, seed=0):
    """A fixed test: the first num_windows windows of seq_len characters of ids, with a rate of
    their positions replaced by mask_id. -> (x (N, T) the text, inputs, targets)."""
    if len(ids) < seq_len * num_windows:
        raise ValueError(f"ids has {len(ids)} characters, fewer than seq_len * num_windows = "
                         f"{seq_len} * {num_windows}")
    x = ids[: seq_len * num_windows].view(num_windows, seq_len)
    inputs, targets = mask_tokens(x, mask_id, rate, torch.Generator().manual_seed(seed),
                                  keep_random=False)
    return x, inputs, targets


@torch.no_grad()
def masked_accuracy(predict, inputs, targets):
    """The fraction of chosen positions (targets != IGNORE) where predict(inputs) (B, T, V) has
    its largest score at the target."""
    chosen = targets != IGNORE
    guess = predict(inputs).argmax(-1)                                 # (B, T)
    return (guess[chosen] == targets[chosen]).float().mean().item()


def unigram_guess(train_ids, vocab_size):
    """The most frequent character of the training text: the guess that ignores all context."""
    return torch.bincount(train_ids, minlength=vocab_size).argmax().item()


class NeighbourBaseline:
    """Guess x_t as the character seen most often between x_{t-1} and x_{t+1} in the training
    text (the most frequent character where that pair never occurred). It reads the true
    neighbours from the text x, even where they are masked too: a head start over the model."""

    def __init__(self, train_ids, vocab_size):
        V = vocab_size
        counts = torch.zeros(V * V * V, dtype=torch.long)              # (left, right, middle)
        keys = (train_ids[:-2] * V + train_ids[2:]) * V + train_ids[1:-1]
        counts.index_add_(0, keys, torch.ones_like(keys))
        counts = counts.view(V, V, V)
        fallback = unigram_guess(train_ids, V)
        self.table = torch.where(counts.sum(-1) > 0, counts.argmax(-1), fallback)   # (V, V)
        self.fallback = fallback

    def __call__(self, x):
        """x (B, T) the true text -> one-hot scores (B, T, V) of the guess at every position
        (the first and last positions of a window, with one neighbour, get the fallback)."""
        guess = torch.full_like(x, self.fallback)
        guess[:, 1:-1] = self.table[x[:, :-2], x[:, 2:]]
        return F.one_hot(guess, self.table.shape[0]).float()
