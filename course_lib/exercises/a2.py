"""Assignment 2: an encoder-decoder Transformer from a blank page, trained to read numbers.

The task (the book trains none like it): a number written in English words, British style, to its
digits::

    "three hundred and twelve"                       -> "312"
    "twelve thousand and four"                       -> "12004"
    "seven hundred thousand and seventeen"           -> "700017"

Both halves of the model matter: a word's meaning depends on its neighbours ("twelve" before
"thousand" is the 12 of "12004"), which the encoder reads, and each digit must be found in the
source, or written as a 0 that no word names, which is the decoder's cross-attention.

Public here (the learner's package carries it): the task's generator (``make_pairs``, drawn from a
seed), the vocabularies and ``encode``, a training loop over the learner's own ``train_step``
(``train``), the held-out exact match (``exact_match``, and ``measure_exact_match``, the goal's
measurement), the ablation harness (``ablation``), a toy model on which the checks run the
learner's training step and decoder (``ToySeq2Seq``), and the records of the assignment's checks.
The solutions are the learner's; the references stay with the grader.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Sequence

import torch
import torch.nn as nn

from ..data import Vocab, pad_batch
from ._compare import compare, named, within
from ._engine import Check, Goal, Mistake, Prediction, WrongResult
from ._forbid import Forbidden
from ._variant import variant_seed

__all__ = ["MAX_DIGITS", "ToySeq2Seq", "ablation", "encode", "exact_match", "make_pairs",
           "measure_exact_match", "number_words", "train", "vocabularies"]

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


# --------------------------------------------------------------------------------------
# Part 1: positions
# --------------------------------------------------------------------------------------
check_a2_positions = Check(
    "check_a2_positions",
    "fn(x (B, T, d_model)) -> x + PE[:T], PE the sinusoidal table of Vaswani et al. (2017): "
    "PE[p, 2i] = sin(p / 10000^(2i / d_model)), PE[p, 2i + 1] = cos(p / 10000^(2i / d_model)), "
    "positions p = 0, 1, ..., T - 1, the same for every row of the batch",
    params=("x",), forbidden=FROM_BLANK,
    mistakes=[
        Mistake("the sines and cosines are in two blocks, [sin ... sin, cos ... cos]; the statement "
                "interleaves them: even features sines, odd features cosines."),
        Mistake("feature k uses the exponent k / d_model: a sine and its cosine share one frequency, "
                "10000^(-2i / d_model) with 2i the even feature of the pair."),
        Mistake("the positions start at 1: the first position is p = 0 (its sines are 0, its "
                "cosines 1)."),
    ],
    hints=["Call your function on zeros of shape (1, 2, 4): position 0 must read [0, 1, 0, 1].",
           "One frequency per pair of features: d_model / 2 of them, from 1 down to about 1/10000. "
           "The angles are an outer product of the positions and the frequencies, (T, d_model / 2).",
           "The sines and cosines alternate: build the two (T, d_model / 2) tables, then interleave "
           "their columns."],
)


# --------------------------------------------------------------------------------------
# Part 2: multi-head attention
# --------------------------------------------------------------------------------------
def _load(module: nn.Module, state: dict, what: str) -> nn.Module:
    mine = {k: tuple(v.shape) for k, v in module.state_dict().items()}
    wanted = {k: tuple(v.shape) for k, v in state.items()}
    if mine != wanted:
        missing = sorted(set(wanted) - set(mine))
        extra = sorted(set(mine) - set(wanted))
        shapes = sorted(k for k in set(mine) & set(wanted) if mine[k] != wanted[k])
        raise WrongResult(f"your {what}'s parameters are not those of the statement: "
                          f"missing {missing}, unexpected {extra}, other shapes {shapes}.")
    module.load_state_dict(state)
    return module.eval()


def _attention_observed(cls, d_model, num_heads, state, query, key_value, mask):
    attention = _load(cls(d_model, num_heads, dropout=0.0), state, "MultiHeadAttention")
    with torch.no_grad():
        result = attention(query, key_value, mask)
    if not (isinstance(result, tuple) and len(result) == 2):
        raise WrongResult("forward must return (out (B, T, d_model), weights (B, h, T, S)).")
    return result


check_a2_attention = Check(
    "check_a2_attention",
    "cls(d_model, num_heads, dropout) -> a module with w_q, w_k, w_v, w_o (each nn.Linear(d_model, "
    "d_model)) whose forward(query (B, T, d_model), key_value (B, S, d_model), mask=None) returns "
    "(out (B, T, d_model), weights (B, h, T, S)): per head, softmax over the keys of q k^T / "
    "sqrt(d_k) where the boolean mask (broadcastable to (B, h, T, S), True = may attend) allows; a "
    "query with no allowed key gets zero weights; head i holds features i*d_k to (i+1)*d_k - 1 of "
    "each projection",
    params=("d_model", "num_heads", "state", "query", "key_value", "mask"),
    call=_attention_observed, compare=named("out", "weights"), outputs=("out", "weights"),
    forbidden=FROM_BLANK,
    mistakes=[
        Mistake("the scores are not divided by sqrt(d_k), the width of one head (not of the model)."),
        Mistake("the heads are split with view(B, h, T, d_k): that cuts the sequence, not the "
                "features. Split the features into (h, d_k), then move h in front of T."),
        Mistake("the softmax runs over the queries (dim -2): each query's weights over the keys "
                "must sum to 1."),
        Mistake("a query whose keys are all masked gets NaN weights (the softmax of a row of -inf): "
                "the statement gives it zero weights."),
    ],
    hints=["Check the shapes at each step on a batch of 2, with h = 2: the projections (B, T, d), "
           "the heads (B, h, T, d_k), the scores (B, h, T, S), the output (B, T, d).",
           "Test one head by hand: with num_heads = 1, the weights of query t over the keys sum to 1 "
           "and are exactly 0 where the mask is False.",
           "A row of -inf gives NaN after the softmax; find those rows (or the NaNs) and give them "
           "zeros, without changing the other rows."],
)


# --------------------------------------------------------------------------------------
# Part 3: the masks
# --------------------------------------------------------------------------------------
check_a2_masks = Check(
    "check_a2_masks",
    "fn(src (B, S), tgt_in (B, T), pad_id) -> (src_mask (B, 1, 1, S), tgt_mask (B, 1, T, T)), bool, "
    "True = may attend: src_mask allows the real source tokens (for the encoder and the "
    "cross-attention); tgt_mask lets decoder position t attend to position s when s <= t and "
    "tgt_in[s] is not padding",
    params=("src", "tgt_in", "pad_id"), outputs=("src_mask", "tgt_mask"), forbidden=FROM_BLANK,
    mistakes=[
        Mistake("the causal part is the wrong triangle: position t may attend to s <= t (itself "
                "and earlier positions), not to later ones."),
        Mistake("the target's padding masks the queries (rows) instead of the keys (columns): a "
                "padded position may still read, no position may read a padded one."),
        Mistake("the padding test is hard-coded to id 0: use pad_id."),
    ],
    hints=["Draw tgt_mask[0, 0] for a row of 4 tokens whose last is padding: a lower triangle with "
           "its last column False.",
           "Each mask is a product (logical and) of conditions with shapes that broadcast: the "
           "causal one is (T, T), the padding one has a 1 where the queries go."],
)


# --------------------------------------------------------------------------------------
# Part 4: the layers and the model
# --------------------------------------------------------------------------------------
def _encoder_layer_observed(cls, d_model, num_heads, d_ff, state, x, src_mask):
    layer = _load(cls(d_model, num_heads, d_ff, dropout=0.0), state, "EncoderLayer")
    with torch.no_grad():
        return layer(x, src_mask)


check_a2_encoder_layer = Check(
    "check_a2_encoder_layer",
    "cls(d_model, num_heads, d_ff, dropout) -> a pre-LN encoder layer with self_attn (your "
    "MultiHeadAttention), ln1, ln2 (nn.LayerNorm(d_model)), ff1 (Linear(d_model, d_ff)), ff2 "
    "(Linear(d_ff, d_model)); forward(x (B, S, d), src_mask) = x + SelfAttn(LN1(x)), then + "
    "FFN(LN2(.)), FFN = ff2(relu(ff1(.)))",
    params=("d_model", "num_heads", "d_ff", "state", "x", "src_mask"),
    call=_encoder_layer_observed, forbidden=FROM_BLANK,
    mistakes=[
        Mistake("the layer norms come after the residual sums (post-LN, the 2017 paper's layer): "
                "the statement asks for pre-LN, x + F(LN(x))."),
        Mistake("the residual adds the normalised input, LN(x) + F(LN(x)): the residual stream is "
                "x itself, never normalised inside the layer."),
        Mistake("the feed-forward network reads the output of self-attention before it is added "
                "to x: each sub-layer reads the stream after the previous sub-layer's sum."),
    ],
    hints=["Two sub-layers, each the same wrapping of a function F: the stream x goes round F, F "
           "reads a normalised copy of it.",
           "With all the weights of self_attn set to zero, your layer must return x + "
           "FFN(LN2(x)): try it."],
)


def _decoder_layer_observed(cls, d_model, num_heads, d_ff, state, y, memory, tgt_mask, src_mask):
    layer = _load(cls(d_model, num_heads, d_ff, dropout=0.0), state, "DecoderLayer")
    with torch.no_grad():
        return layer(y, memory, tgt_mask, src_mask)


check_a2_decoder_layer = Check(
    "check_a2_decoder_layer",
    "cls(d_model, num_heads, d_ff, dropout) -> a pre-LN decoder layer with self_attn, cross_attn "
    "(your MultiHeadAttention), ln1, ln2, ln3, ff1, ff2; forward(y (B, T, d), memory (B, S, d), "
    "tgt_mask, src_mask): y + SelfAttn(LN1(y), tgt_mask), then + CrossAttn(LN2(.), memory, "
    "src_mask), then + FFN(LN3(.))",
    params=("d_model", "num_heads", "d_ff", "state", "y", "memory", "tgt_mask", "src_mask"),
    call=_decoder_layer_observed, forbidden=FROM_BLANK,
    mistakes=[
        Mistake("the memory goes through ln2 too: only the decoder's stream is normalised before "
                "the cross-attention; the memory arrives normalised by the encoder's final norm."),
        Mistake("the cross-attention has no residual: its output replaces the stream instead of "
                "being added to it."),
        Mistake("the layer norms come after the residual sums (post-LN): the statement asks for "
                "pre-LN."),
    ],
    hints=["Three sub-layers wrapped as in your encoder layer; only the cross-attention takes a "
           "second input.",
           "In cross-attention the queries come from the decoder's stream and the keys and values "
           "from memory, under the source's mask."],
)


def _model_properties(cls, kwargs, src, tgt_in):
    """What the check observes of a Transformer built from ``cls``: shapes and properties, not
    weights (the learner names the model's parts as they like)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        tied, untied = cls(**kwargs, tie=True).eval(), cls(**kwargs, tie=False).eval()
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731 (shared weights once)
    pad, vocab = kwargs["pad_id"], kwargs["tgt_vocab_size"]
    with torch.no_grad():
        logits = tied(src, tgt_in)
        if not isinstance(logits, torch.Tensor):
            raise WrongResult(f"model(src, tgt_in) must return the logits, got {type(logits).__name__}.")
        same = lambda a, b: a.shape == b.shape and bool(torch.allclose(a, b, atol=1e-5))  # noqa: E731
        half = tgt_in.shape[1] // 2
        later = tgt_in.clone()
        later[:, half:] = torch.where(later[:, half:] == pad, later[:, half:],
                                      (later[:, half:] + 1 - 4) % (vocab - 4) + 4)
        padded = torch.cat([src, torch.full_like(src[:, :3], pad)], dim=1)
        swapped = src.clone()
        swapped[:, [0, 1]] = swapped[:, [1, 0]]
        changed = src.clone()
        changed[:, 0] = (changed[:, 0] + 1 - 4) % (kwargs["src_vocab_size"] - 4) + 4
        return {
            "logits shape": tuple(logits.shape),
            "decode(tgt_in, encode(src), src) equals model(src, tgt_in)":
                same(tied.decode(tgt_in, tied.encode(src), src), logits),
            "position t's logits ignore the target after t (causal)":
                same(tied(src, later)[:, :half], logits[:, :half]),
            "padding added to the source changes nothing": same(tied(padded, tgt_in), logits),
            "the source's first word changes the logits": not same(tied(changed, tgt_in), logits),
            "swapping the first two source words changes the logits":
                not same(tied(swapped, tgt_in), logits),
            "tie=True has tgt_vocab_size * d_model fewer parameters than tie=False":
                count(untied) - count(tied) == vocab * kwargs["d_model"],
        }


check_a2_model = Check(
    "check_a2_model",
    "cls(src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, dropout, max_len, "
    "pad_id, tie) -> the encoder-decoder Transformer: encode(src) -> memory (B, S, d_model), "
    "decode(tgt_in, memory, src) -> logits (B, T, tgt_vocab_size), forward(src, tgt_in) -> logits; "
    "tie=True shares the target embedding with the output layer (checked by its properties: "
    "shapes, causality, source padding, word order, the tied parameters)",
    params=("kwargs", "src", "tgt_in"), call=_model_properties, forbidden=FROM_BLANK,
    mistakes=[
        Mistake("the decoder's self-attention is not causal: position t reads the targets after "
                "it, which greedy decoding will not have."),
        Mistake("the cross-attention reads the source's padding: pass the source mask to every "
                "decoder layer, not only to the encoder."),
        Mistake("the source has no positional encoding: the encoder and the cross-attention then "
                "see the words as a bag, and 'twenty one thousand and five' reads like 'five "
                "thousand and twenty one'."),
        Mistake("tie=True copies the embedding's values into the output layer: they are two "
                "parameters that drift apart in training. Share the Parameter itself."),
    ],
    hints=["The failing property names what to look at; run it yourself on a batch of 2: e.g. "
           "change the last target token and compare the first positions' logits.",
           "Both embeddings go through your add_positions (scaled by sqrt(d_model) first, if "
           "you follow the paper); encode ends with a final LayerNorm, and so does the decoder "
           "before the output layer (pre-LN leaves the stream unnormalised otherwise).",
           "Tying: the output layer's weight (V, d) and the embedding's weight (V, d) have the same "
           "shape: assign one Parameter to both."],
)


# --------------------------------------------------------------------------------------
# Part 5: the loss, the schedule, the training step
# --------------------------------------------------------------------------------------
check_a2_smoothed_loss = Check(
    "check_a2_smoothed_loss",
    "fn(logits (B, T, V), tgt_out (B, T), pad_id, eps) -> the mean over the non-padding target "
    "tokens of the cross-entropy -sum_v q_v log softmax(logits)_v with the smoothed target q: "
    "1 - eps on the target, eps / (V - 2) on every other token except pad_id, 0 on pad_id",
    params=("logits", "tgt_out", "pad_id", "eps"), forbidden=LOSSES,
    mistakes=[
        Mistake("eps is spread over all V tokens (eps / V each, the target included, as "
                "F.cross_entropy's label_smoothing): here the target gets exactly 1 - eps and "
                "pad_id nothing."),
        Mistake("the padding positions are counted in the mean: average over the real target "
                "tokens only."),
        Mistake("eps / (V - 1) goes to every token but the target, pad_id included: pad_id "
                "must get 0 (the model never writes it), so the others get eps / (V - 2)."),
    ],
    hints=["With eps = 0 your function must give the ordinary cross-entropy of the real tokens: "
           "test that first.",
           "Build q as a (B, T, V) tensor: fill, set the pad column, put 1 - eps at the target "
           "(scatter or a one-hot), then sum q * log_softmax over V.",
           "Check that q sums to 1 over V at every position."],
)


def _schedule_observed(fn, peak_lr, warmup, total_steps):
    return torch.tensor([float(fn(step, peak_lr, warmup, total_steps))
                         for step in range(1, total_steps + 1)], dtype=torch.float64)


check_a2_lr_schedule = Check(
    "check_a2_lr_schedule",
    "fn(step, peak_lr, warmup, total_steps) -> the learning rate of step (1, 2, ..., total_steps): "
    "peak_lr * min(step / warmup, (total_steps - step) / (total_steps - warmup)), a linear rise "
    "to peak_lr at step warmup, then a linear fall to 0 at total_steps (checked at every step)",
    params=("peak_lr", "warmup", "total_steps"), call=_schedule_observed, forbidden=SCHEDULES,
    mistakes=[
        Mistake("the steps are counted from 0: the first step (step = 1) has the rate "
                "peak_lr / warmup, not 0."),
        Mistake("the fall starts at step 0 instead of at the peak: after the warm-up the rate "
                "goes from peak_lr at step warmup to 0 at total_steps."),
        Mistake("the rate stays at peak_lr after the warm-up: it falls linearly to 0."),
    ],
    hints=["Plot your rate against the step for warmup = 10, total_steps = 50: a triangle with its "
           "top at (10, peak_lr).",
           "Each side of the triangle is a straight line through two known points."],
)


def _train_step_observed(fn, toy_args, state, src, tgt_out, first_step, hp):
    """Two calls of ``fn`` on a toy model with a fresh SGD optimiser (its update is linear in the
    gradient, so equivalent ways of computing the loss agree to rounding): the losses, the
    learning rates set, and the parameters after."""
    model = ToySeq2Seq(*toy_args)
    model.load_state_dict(state)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    losses, rates = [], []
    for step in (first_step, first_step + 1):
        losses.append(float(fn(model, optimizer, src, tgt_out, step, dict(hp))))
        rates.append(optimizer.param_groups[0]["lr"])
    return {"losses": torch.tensor(losses), "learning rates": torch.tensor(rates, dtype=torch.float64),
            "parameters after": {k: v.detach().clone() for k, v in model.state_dict().items()}}


check_a2_train_step = Check(
    "check_a2_train_step",
    "fn(model, optimizer, src (B, S), tgt_out (B, T), step, hp) -> the loss (a float): sets the "
    "optimizer's learning rate to your lr_at(step, hp['peak_lr'], hp['warmup'], "
    "hp['total_steps']), runs the model on (src, tgt_in = <bos> then tgt_out without its last "
    "token, hp['bos_id']), takes your smoothed loss (hp['pad_id'], hp['eps']), and makes one "
    "optimizer step with the gradients clipped to norm hp['clip'] (run twice on a toy model; the "
    "losses, the rates and the parameters after are compared; the check's optimizer is SGD)",
    params=("toy_args", "state", "src", "tgt_out", "first_step", "hp"),
    call=_train_step_observed, forbidden=LOSSES,
    mistakes=[
        Mistake("the model reads tgt_out itself: the decoder's input is tgt_out shifted right, "
                "<bos> in front, the last token dropped; otherwise it learns to copy."),
        Mistake("the gradients are not zeroed: each step adds to the previous step's gradients."),
        Mistake("the gradients are not clipped to norm hp['clip'] before the optimizer's step."),
    ],
    hints=["The first loss is right but the second is not? Look at what is left in the "
           "parameters' .grad between two calls.",
           "Order: set the rate, forward, loss, zero the old gradients, backward, clip, step."],
)


# --------------------------------------------------------------------------------------
# Part 6: greedy decoding
# --------------------------------------------------------------------------------------
def _decoding_observed(fn, toy_args, state, src, max_len, bos_id, eos_id):
    """fn(model, src, max_len, bos_id, eos_id) on a toy model, counting the encoder's and the
    decoder's calls."""
    model = ToySeq2Seq(*toy_args)
    model.load_state_dict(state)
    model.eval()
    calls = {"encode": 0, "decode": 0}
    encode_fn, decode_fn = model.encode, model.decode

    def counted_encode(*args, **kwargs):
        calls["encode"] += 1
        return encode_fn(*args, **kwargs)

    def counted_decode(*args, **kwargs):
        calls["decode"] += 1
        return decode_fn(*args, **kwargs)

    model.encode, model.decode = counted_encode, counted_decode
    with torch.no_grad():
        tokens = fn(model, src, max_len, bos_id, eos_id)
    if not isinstance(tokens, torch.Tensor):
        raise WrongResult(f"expected a tensor of token ids (B, L), got {type(tokens).__name__}.")
    return {"tokens": tokens, "encoder calls": calls["encode"], "decoder calls": calls["decode"]}


def _same_tokens_batched(got, expected):
    problem = compare(got["tokens"], expected["tokens"], "tokens")
    if problem:
        return problem
    if got["encoder calls"] != 1:
        return (f"the tokens are right, but the encoder ran {got['encoder calls']} times: encode the "
                "source once, before the loop.")
    if got["decoder calls"] > expected["decoder calls"]:
        return (f"the tokens are right, but the decoder ran {got['decoder calls']} times where "
                f"{expected['decoder calls']} calls suffice: one call per step for the whole batch, "
                "and stop as soon as every row has written <eos>.")
    return None


check_a2_greedy_decode = Check(
    "check_a2_greedy_decode",
    "fn(model, src (B, S), max_len, bos_id, eos_id) -> (B, L) ids without <bos>, L <= max_len: "
    "encode once, then append the most likely token for every row at each step (one decoder call "
    "per step for the whole batch), until every row has written eos_id or after max_len tokens; "
    "a row that has written eos_id gets eos_id from then on (run on a toy model, counting the "
    "encoder's and the decoder's calls)",
    params=("toy_args", "state", "src", "max_len", "bos_id", "eos_id"),
    call=_decoding_observed, compare=_same_tokens_batched, forbidden=DECODERS,
    mistakes=[
        Mistake("the <bos> column is returned: the result starts with the first written token."),
        Mistake("a row keeps writing after its <eos>: from then on it gets eos_id."),
        Mistake("the loop stops at the first <eos> of any row: it runs until every row has "
                "written one (or max_len)."),
        Mistake("the decoder reads only the last token: at each step it reads the whole prefix, "
                "<bos> and every token written so far."),
    ],
    hints=["Keep a (B,) boolean 'finished' and update it after each step.",
           "At each step the decoder reads the whole prefix (B, t) and you keep the logits of its "
           "last position: (B, V)."],
)


# --------------------------------------------------------------------------------------
# Part 7: the goal, and the prediction before it
# --------------------------------------------------------------------------------------
check_a2_exact_match = Goal(
    "check_a2_exact_match",
    "the held-out exact match of your trained Transformer with your greedy decoding, measured by "
    "the check on 500 numbers it draws (numbers >= 100 that training never draws): at least 0.8",
    quantity="the held-out exact match", at_least=0.8, measure=measure_exact_match,
    expects="(model, greedy_decode): your trained model and your greedy decoding function",
    forbidden=FROM_BLANK + (Forbidden("course_lib.decoding"),),
    mistakes=[
        Mistake("the model is too small or trained too few steps: watch the loss; with eps = 0.1 "
                "it cannot fall below 0.57 (the entropy of the smoothed target over 14 tokens), "
                "and a model that reads numbers well ends near 0.6"),
        Mistake("the decoder's input is not the shifted target, so greedy decoding feeds the model "
                "what it never saw in training"),
        Mistake("a mask is wrong in a way the parts' checks did not catch: decode a few training "
                "numbers and look at which digits go wrong (the zeros? the thousands?)"),
    ],
    hints=["Decode ten training pairs and print them next to their targets: a model that cannot "
           "write its training numbers is undertrained or broken, not overfitted.",
           "Which numbers fail? Group the held-out misses by their number of digits."],
)

check_a2_exact_match_prediction = Prediction(
    "check_a2_exact_match_prediction",
    "your prediction of the held-out exact match of your trained model, against the measurement",
    quantity="the held-out exact match after your training run", tolerance=within(abs=0.1),
    example=0.99,
    explanation=("300 batches of 64 are about one pass over the 20 000 training pairs, but each "
                 "of the 31 words, and each way of combining them, is seen thousands of times: a "
                 "small Transformer then writes nearly every held-out number exactly (the "
                 "instructor's model, width 64, 2 + 2 layers: 0.96 to 0.99 over three seeds after "
                 "300 steps, 0.994 to 0.998 after 400, 0.88 to 0.94 after 250). What is hard is the "
                 "zeros that no word names: 'twelve thousand and four' has three, and the model "
                 "must count them from where 'thousand' and 'and' sit. Exact match is severe, one "
                 "wrong digit fails the whole number, but once the positions are read the task has "
                 "no ambiguity left."),
    mistakes=[
        Mistake("a wrong digit fails a whole number, but the task is nearly deterministic: the "
                "words name the digits, and the model learns the few rules for the zeros.",
                lambda measured: measured - 0.35),
        Mistake("held-out numbers are new, but their words are not: every word and rule appears "
                "in training, only the combinations are new.", lambda measured: 0.3),
    ],
)
