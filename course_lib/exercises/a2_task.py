"""Assignment 2's task and harness (public, not solutions): numbers written in English words
to their digits (``make_pairs``, drawn from a seed), the vocabularies and ``encode``, a training
loop over the learner's own ``train_step`` (``train``), the held-out exact match
(``exact_match``, and ``measure_exact_match``, the goal's measurement), the ablation harness
(``ablation``) and a toy model on which the checks run the learner's training step and decoder
(``ToySeq2Seq``), and what the assignment's parts put off limits (``FROM_BLANK``, ``LOSSES``,
``SCHEDULES``, ``DECODERS``). The checks' records are in ``a2.py`` (the model's parts) and
``a2_train.py`` (training, decoding, the goal); ``a2.py`` re-exports every public name.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Sequence

import torch
import torch.nn as nn

from ..data import Vocab, pad_batch
from ._forbid import Forbidden
from ._record import WrongResult
from ._variant import variant_seed

__all__ = ["DECODERS", "FROM_BLANK", "LOSSES", "MAX_DIGITS", "SCHEDULES", "ToySeq2Seq", "ablation",
           "encode", "exact_match", "make_pairs", "measure_exact_match", "number_words", "train",
           "vocabularies"]

# --------------------------------------------------------------------------------------
# The task
# --------------------------------------------------------------------------------------
ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
        "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
        "nineteen"]
TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
WORDS = ONES + TENS[2:] + ["hundred", "thousand", "and"]
MAX_DIGITS = 6                      # numbers 0 to 999 999
DIGIT_WEIGHTS = (1, 1, 2, 2, 3, 3)  # how often a number of 1, 2, ..., 6 digits is drawn
HELD_OUT_EVERY = 5                  # one number >= 100 in 5 is held out (never in training)


def _below_thousand(n: int) -> list[str]:
    hundreds, rest = divmod(n, 100)
    words = [ONES[hundreds], "hundred"] if hundreds else []
    if hundreds and rest:
        words.append("and")
    if rest >= 20:
        words.append(TENS[rest // 10])
        if rest % 10:
            words.append(ONES[rest % 10])
    elif rest or not hundreds:
        words.append(ONES[rest])
    return words


def number_words(n: int) -> list[str]:
    """0 <= n < 10**6 in English words, British style ("and" before the last tens and units):
    312 -> ["three", "hundred", "and", "twelve"], 12004 -> ["twelve", "thousand", "and", "four"]."""
    if not (isinstance(n, int) and 0 <= n < 10 ** MAX_DIGITS):
        raise ValueError(f"n must be an integer from 0 to {10 ** MAX_DIGITS - 1}, got {n!r}")
    if n < 1000:
        return _below_thousand(n)
    thousands, rest = divmod(n, 1000)
    words = _below_thousand(thousands) + ["thousand"]
    if rest == 0:
        return words
    return words + (["and"] if rest < 100 else []) + _below_thousand(rest)


def is_held_out(n: int) -> bool:
    """Whether n is reserved for the held-out sets: a fixed fifth of the numbers >= 100 (a hash of
    n), never drawn for training. The numbers below 100 are the task's building blocks and are in
    both splits."""
    return n >= 100 and (n * 2654435761) % 2 ** 32 % HELD_OUT_EVERY == 0


def make_pairs(count: int, seed: int, split: str = "train") -> list[tuple[str, str]]:
    """``count`` pairs (words, digits), e.g. ("twelve thousand and four", "12004"), drawn from
    ``seed``: a number of d digits with probability DIGIT_WEIGHTS[d - 1] / 12, uniform among those;
    ``split`` "train" never draws a held-out number, "test" draws only held-out numbers (and
    numbers below 100)."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    if not (isinstance(count, int) and count >= 1):
        raise ValueError(f"count must be a positive integer, got {count!r}")
    rng, pairs = random.Random(seed), []
    while len(pairs) < count:
        digits = rng.choices(range(1, MAX_DIGITS + 1), weights=DIGIT_WEIGHTS)[0]
        n = rng.randrange(0 if digits == 1 else 10 ** (digits - 1), 10 ** digits)
        if n >= 100 and is_held_out(n) != (split == "test"):
            continue
        pairs.append((" ".join(number_words(n)), str(n)))
    return pairs


def vocabularies() -> tuple[Vocab, Vocab]:
    """(source vocabulary: the 31 words, target vocabulary: the 10 digits), each with <pad> = 0,
    <bos> = 1, <eos> = 2, <unk> = 3 first."""
    return Vocab(WORDS), Vocab("0123456789")


SRC_VOCAB, TGT_VOCAB = vocabularies()
PAD_ID, BOS_ID, EOS_ID = TGT_VOCAB.pad_id, TGT_VOCAB.bos_id, TGT_VOCAB.eos_id


def encode(pairs: Sequence[tuple[str, str]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Pairs -> (src (N, S) word ids, tgt_out (N, T) digit ids followed by <eos>), both padded
    with 0 on the right to the longest of the batch."""
    src, _ = pad_batch([SRC_VOCAB.encode(words.split()) for words, _ in pairs], PAD_ID)
    tgt, _ = pad_batch([TGT_VOCAB.encode(digits, eos=True) for _, digits in pairs], PAD_ID)
    return src, tgt


# --------------------------------------------------------------------------------------
# Training and measuring a model built from the learner's parts
# --------------------------------------------------------------------------------------
TRAIN_SIZE = 20_000


def _trim(ids: torch.Tensor) -> torch.Tensor:
    """Drop the columns that are padding in every row."""
    return ids[:, : int((ids != PAD_ID).sum(1).max())]


def train(model: nn.Module, train_step: Callable, steps: int, hp: dict, *, seed: int = 0,
          batch_size: int = 64, lr_betas=(0.9, 0.98), log_every: int = 0) -> list[float]:
    """Train ``model`` for ``steps`` steps of the learner's ``train_step(model, optimizer, src,
    tgt_out, step, hp) -> loss`` (step = 1, 2, ..., steps) on batches drawn from 20 000 training
    pairs (``make_pairs(20000, variant_seed() * 7919 + seed)``); Adam (``lr_betas``), whose
    learning rate ``train_step`` sets at each step. Returns the losses."""
    if not (isinstance(steps, int) and steps >= 1):
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    src, tgt = encode(make_pairs(TRAIN_SIZE, seed=variant_seed() * 7919 + seed))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.0, betas=lr_betas)
    g = torch.Generator().manual_seed(seed)
    losses = []
    for step in range(1, steps + 1):
        rows = torch.randint(0, len(src), (batch_size,), generator=g)
        losses.append(float(train_step(model, optimizer, _trim(src[rows]), _trim(tgt[rows]), step, hp)))
        if log_every and step % log_every == 0:
            print(f"step {step:4d}  loss {sum(losses[-log_every:]) / log_every:.3f}")
    return losses


def exact_match(model: nn.Module, decode: Callable, pairs: Sequence[tuple[str, str]]) -> float:
    """The fraction of ``pairs`` whose digits ``decode(model, src, MAX_DIGITS + 1, BOS_ID,
    EOS_ID)`` writes exactly (read up to the first <eos>), with the model in eval mode and no
    gradients."""
    src, _ = encode(pairs)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = decode(model, src, MAX_DIGITS + 1, BOS_ID, EOS_ID)
    finally:
        model.train(was_training)
    if not isinstance(out, torch.Tensor) or out.dim() != 2 or out.shape[0] != len(pairs):
        raise WrongResult(f"the decode function must return the token ids (B, L) of the {len(pairs)} "
                          f"sources, got {describe_tokens(out)}.")
    written = [TGT_VOCAB.decode(row) for row in out.long()]
    return sum(w == digits for w, (_, digits) in zip(written, pairs)) / len(pairs)


def describe_tokens(out) -> str:
    if isinstance(out, torch.Tensor):
        return f"a tensor of shape {tuple(out.shape)}"
    return type(out).__name__


HELD_OUT_SIZE = 500


def measure_exact_match(obj, seed: int) -> float:
    """The goal's measurement: ``obj`` is ``(model, decode)``, the learner's trained model and
    greedy decoding function. Draws 500 held-out pairs from ``seed`` (``make_pairs(500, seed,
    "test")``) and returns the exact match. To make sure the number comes from the model, the same
    decoding runs once more with the model's weights re-drawn at random: that must score (almost)
    nothing."""
    if not (isinstance(obj, (tuple, list)) and len(obj) == 2):
        raise WrongResult(f"pass (model, greedy_decode): your trained model and your decoding "
                          f"function, got {type(obj).__name__}.")
    model, decode = obj
    if not isinstance(model, nn.Module) or not callable(decode):
        raise WrongResult(f"pass (model, greedy_decode): an nn.Module and a function, got "
                          f"({type(model).__name__}, {type(decode).__name__}).")
    pairs = make_pairs(HELD_OUT_SIZE, seed, split="test")
    score = exact_match(model, decode, pairs)
    scrambled = copy.deepcopy(model)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in scrambled.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    control = exact_match(scrambled, decode, pairs)
    if control > 0.1:
        raise WrongResult(f"with the model's weights re-drawn at random, the decoding still writes "
                          f"{control:.0%} of the numbers exactly: the exact match must come from "
                          f"the model, through its encode and decode.")
    return score


def ablation(build_model: Callable[[], nn.Module], train_step: Callable, decode: Callable, *,
             steps: int, hp: dict, seeds: Sequence[int] = (0, 1, 2), batch_size: int = 64,
             test_size: int = 300) -> list[float]:
    """The ablation harness: for each seed, ``torch.manual_seed(seed)``, a fresh
    ``build_model()``, ``train(...)`` for ``steps`` steps (training data and batches drawn from
    the seed), then the exact match on ``test_size`` held-out pairs (the same for every seed and
    every configuration). Returns one exact match per seed."""
    test = make_pairs(test_size, seed=variant_seed() * 7919 + 104_729, split="test")
    scores = []
    for seed in seeds:
        torch.manual_seed(seed)
        model = build_model()
        train(model, train_step, steps, hp, seed=seed, batch_size=batch_size)
        scores.append(exact_match(model, decode, test))
    return scores


# --------------------------------------------------------------------------------------
# A toy model for the checks of the training step and of greedy decoding
# --------------------------------------------------------------------------------------
class ToySeq2Seq(nn.Module):
    """A small model with a Transformer's interface, not a Transformer: the checks run the learner's
    training step and decoder on it.

        memory = tanh(E_src[src])                                     (B, S, d)
        h_t    = tanh(E_tgt[y_t] + P[t] + mean of the real memory rows + mean_{u <= t} E_tgt[y_u])
        logits = h_t W + b                                            (B, T, V)

    encode(src) -> memory; decode(tgt_in, memory, src) -> logits (each position sees only the
    tokens up to it); forward(src, tgt_in) = decode(tgt_in, encode(src), src).
    """

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, d: int = 8, max_len: int = 16,
                 pad_id: int = 0):
        super().__init__()
        self.pad_id = pad_id
        self.src_embed = nn.Embedding(src_vocab_size, d)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d)
        self.pos = nn.Parameter(torch.randn(max_len, d))
        self.out = nn.Linear(d, tgt_vocab_size)

    def encode(self, src):
        return torch.tanh(self.src_embed(src))                                 # (B, S, d)

    def decode(self, tgt_in, memory, src):
        real = (src != self.pad_id).unsqueeze(-1).float()                       # (B, S, 1)
        context = (memory * real).sum(1, keepdim=True) / real.sum(1, keepdim=True).clamp(min=1)
        y = self.tgt_embed(tgt_in)                                              # (B, T, d)
        count = torch.arange(1, y.shape[1] + 1, device=y.device).view(1, -1, 1)
        prefix = y.cumsum(1) / count                                            # causal mean
        return self.out(torch.tanh(y + self.pos[: y.shape[1]] + context + prefix))

    def forward(self, src, tgt_in):
        return self.decode(tgt_in, self.encode(src), src)


# --------------------------------------------------------------------------------------
# What the parts put off limits
# --------------------------------------------------------------------------------------
SDPA_ATEN = ("scaled_dot_product_attention", "_scaled_dot_product_attention_math",
             "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention",
             "_scaled_dot_product_efficient_attention", "_native_multi_head_attention",
             "_transformer_encoder_layer_fwd")
LIBRARY = (Forbidden("course_lib.transformer"), Forbidden("course_lib.multihead"),
           Forbidden("course_lib.attention"), Forbidden("course_lib.positional"),
           Forbidden("course_lib.gpt"))
TORCH_MODULES = (Forbidden("torch.nn.Transformer"), Forbidden("torch.nn.TransformerEncoder"),
                 Forbidden("torch.nn.TransformerDecoder"), Forbidden("torch.nn.TransformerEncoderLayer"),
                 Forbidden("torch.nn.TransformerDecoderLayer"), Forbidden("torch.nn.MultiheadAttention"),
                 Forbidden("torch.nn.functional.multi_head_attention_forward"),
                 Forbidden("torch.nn.functional.scaled_dot_product_attention"),
                 Forbidden(aten=SDPA_ATEN, label="scaled dot-product attention (torch's fused "
                                                  "kernels, aten::scaled_dot_product_attention ...)"))
FROM_BLANK = LIBRARY + TORCH_MODULES
LOSSES = (Forbidden("torch.nn.functional.cross_entropy"), Forbidden("torch.nn.functional.nll_loss"),
          Forbidden("torch.nn.CrossEntropyLoss"), Forbidden("torch.nn.NLLLoss"),
          Forbidden(aten=("nll_loss_forward", "nll_loss_nd", "nll_loss", "nll_loss2d_forward",
                          "cross_entropy_loss"),
                    label="torch's negative log-likelihood (aten::nll_loss_forward, reached by "
                          "F.cross_entropy with or without label_smoothing)"),
          Forbidden("course_lib.transformer_train"))
SCHEDULES = (Forbidden("torch.optim.lr_scheduler"), Forbidden("course_lib.transformer_train"),
             Forbidden("course_lib.train.warmup_cosine"), Forbidden("course_lib.train.one_cycle"))
DECODERS = (Forbidden("course_lib.decoding"),) + LIBRARY
