"""Assignment 1: an attention encoder-decoder that evaluates arithmetic, from blank.

The task: a sum or difference of two or three whole numbers from 0 to 20, written as
characters, to its value, e.g. ``"17-4+9"`` -> ``"22"`` and ``"3-20"`` -> ``"-17"``. Sources
have 3 to 8 characters and targets 1 to 3, so a batch is padded on both sides.

What is public here: the task's generator (:func:`make_pairs`), the vocabulary (ids only: turning
strings into padded tensors is part 1), the recipe's constants, the goal's measurement
(:func:`measure_exact_match`), a stand-in model for the check of the training loop
(:class:`ToyModel`), and the records. The solutions stay with the grader.

The expressions are split once and for all into a training part and a held-out part (by a
hash of the expression's text, a fifth held out): ``make_pairs(..., split="heldout")`` never
draws an expression that ``split="train"`` can draw, whatever the seeds.
"""

from __future__ import annotations

import random
import zlib

import torch
import torch.nn as nn

from ._compare import within
from ._engine import Check, Goal, Mistake, Prediction, WrongResult
from ._forbid import Forbidden

__all__ = ["BOS_ID", "EOS_ID", "PAD_ID", "TOKEN_ID", "VOCAB", "ToyModel", "make_pairs",
           "measure_exact_match", "to_text"]

# --------------------------------------------------------------------------------------
# The task
# --------------------------------------------------------------------------------------
VOCAB = ("<pad>", "<bos>", "<eos>", *"0123456789", "+", "-")
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
TOKEN_ID = {token: i for i, token in enumerate(VOCAB)}
MAX_OPERAND = 20
MAX_TARGET = 3  # "-40" .. "60"

# The recipe of the notebook (the goal's bar was set from it).
MODEL_SIZES = (32, 64, 64)  # emb_size, hidden_size (per direction), attn_size
TRAIN_STEPS, BATCH_SIZE, PEAK_LR, WARMUP, MAX_NORM = 600, 64, 0.01, 40, 1.0


def _expression(rng: random.Random, terms: tuple[int, int]) -> tuple[str, str]:
    numbers = [rng.randint(0, MAX_OPERAND) for _ in range(rng.randint(*terms))]
    text, value = str(numbers[0]), numbers[0]
    for n in numbers[1:]:
        sign = rng.choice("+-")
        text += sign + str(n)
        value += n if sign == "+" else -n
    return text, str(value)


def is_heldout(expression: str) -> bool:
    """Whether an expression belongs to the held-out fifth (a fixed hash of its text)."""
    return zlib.crc32(expression.encode()) % 5 == 0


def make_pairs(n: int, seed: int, terms: tuple[int, int] = (2, 3),
               split: str = "train") -> list[tuple[str, str]]:
    """n (expression, value) pairs drawn from ``seed``: between terms[0] and terms[1] numbers
    from 0 to 20 joined by + or -, from the training part of the expressions or the held-out
    part (``split``)."""
    if split not in ("train", "heldout"):
        raise ValueError(f"split must be 'train' or 'heldout', got {split!r}")
    if not (isinstance(terms, tuple) and len(terms) == 2 and 1 <= terms[0] <= terms[1]):
        raise ValueError(f"terms must be (fewest, most) numbers, got {terms!r}")
    rng, pairs = random.Random(seed), []
    while len(pairs) < n:
        pair = _expression(rng, terms)
        if is_heldout(pair[0]) == (split == "heldout"):
            pairs.append(pair)
    return pairs


def to_text(ids) -> str:
    """Token ids -> the characters they write, up to the first <eos> (specials skipped)."""
    chars = []
    for i in (ids.tolist() if isinstance(ids, torch.Tensor) else ids):
        if i == EOS_ID:
            break
        if i > EOS_ID:
            chars.append(VOCAB[i])
    return "".join(chars)


class ToyModel(nn.Module):
    """A stand-in with the assignment's interface, for the check of the training loop:
    model(src, src_len, tgt_in) -> (logits (B, T, V), weights (B, T, S)). It reads the average
    embedding of the source's characters and the previous target character; its weights are
    uniform over the source. (Not a sequence-to-sequence model worth training.)"""

    def __init__(self, vocab_size: int, size: int):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, size)
        self.out = nn.Linear(size, vocab_size)

    def forward(self, src, src_len, tgt_in):
        real = (src != PAD_ID).float()  # (B, S)
        uniform = real / src_len[:, None]
        summary = torch.einsum("bs,bsd->bd", uniform, self.embed(src))  # (B, d)
        logits = self.out(torch.tanh(self.embed(tgt_in) + summary[:, None]))  # (B, T, V)
        return logits, uniform[:, None].expand(-1, tgt_in.shape[1], -1)


# --------------------------------------------------------------------------------------
# The goal's measurement: greedy decoding through the learner's forward pass
# --------------------------------------------------------------------------------------
def _logits_of(model, src, src_len, tgt_in):
    out = model(src, src_len, tgt_in)
    logits = out[0] if isinstance(out, (tuple, list)) else out
    want = (src.shape[0], tgt_in.shape[1], len(VOCAB))
    if not isinstance(logits, torch.Tensor) or tuple(logits.shape) != want:
        got = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise WrongResult(f"model(src, src_len, tgt_in) must return the logits {want} (or a tuple "
                          f"whose first part they are), got {got}.")
    return logits


def exact_match(model, pairs) -> float:
    """The share of ``pairs`` whose value the model writes exactly, decoding greedily: the
    decoder input grows by the argmax at each step and the whole forward pass is run again
    (slow, but it needs nothing but the model's forward)."""
    from course_lib.data import pad_batch

    if not isinstance(model, nn.Module):
        raise WrongResult(f"expected your trained Seq2Seq model (a torch.nn.Module), got "
                          f"{type(model).__name__}.")
    src, src_len = pad_batch([[TOKEN_ID[c] for c in s] for s, _ in pairs], PAD_ID)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            tgt_in = torch.full((len(pairs), 1), BOS_ID, dtype=torch.long)
            for _ in range(MAX_TARGET + 1):
                logits = _logits_of(model, src, src_len, tgt_in)
                tgt_in = torch.cat([tgt_in, logits[:, -1].argmax(-1, keepdim=True)], 1)
    finally:
        model.train(was_training)
    written = [to_text(row[1:]) for row in tgt_in]
    return sum(w == t for w, (_, t) in zip(written, pairs)) / len(pairs)


def measure_exact_match(model, seed: int, n: int = 500) -> float:
    """The goal's measurement: exact match on ``n`` held-out expressions drawn from ``seed``."""
    return exact_match(model, make_pairs(n, seed=seed, split="heldout"))


# --------------------------------------------------------------------------------------
# What each part puts off limits
# --------------------------------------------------------------------------------------
_LIBRARY_MODELS = (Forbidden("course_lib.seq2seq"), Forbidden("course_lib.rnn"),
                   Forbidden("course_lib.attention"), Forbidden("course_lib.multihead"))
_SDPA = Forbidden(label="scaled_dot_product_attention",
                  aten=("scaled_dot_product_attention", "_scaled_dot_product_attention_math",
                        "_scaled_dot_product_flash_attention_for_cpu",
                        "_scaled_dot_product_efficient_attention"))
_ATTENTION = (*_LIBRARY_MODELS, Forbidden("torch.nn.MultiheadAttention"), _SDPA)


def _module_run(fn, config, state, *inputs):
    """Build the learner's class with ``config``, load ``state`` and run it on ``inputs``."""
    module = fn(*config)
    if not isinstance(module, nn.Module):
        raise WrongResult(f"pass your class itself (a subclass of nn.Module): calling it with "
                          f"{tuple(config)} gave {type(module).__name__}.")
    name = getattr(fn, "__name__", "class")
    missing, unexpected = [], []
    try:
        result = module.load_state_dict(state, strict=False)
        missing, unexpected = result.missing_keys, result.unexpected_keys
    except RuntimeError as exc:
        raise WrongResult(f"the check loads its weights into your {name}{tuple(config)}, "
                          f"and a shape differs: {str(exc).splitlines()[-1].strip()}") from None
    if missing or unexpected:
        raise WrongResult(f"the check loads its weights into your {name}{tuple(config)} "
                          f"by name; missing: {missing or 'none'}; not expected: "
                          f"{unexpected or 'none'}. Name the layers as the statement says.")
    module.eval()
    with torch.no_grad():
        return module(*inputs)


# --------------------------------------------------------------------------------------
# The records
# --------------------------------------------------------------------------------------
check_a1_make_batch = Check(
    "check_a1_make_batch",
    "fn(sources list of B str, targets list of B str) -> (src (B, S) long right-padded with "
    "PAD_ID, src_len (B,) long, src_mask (B, S) bool True at real characters, tgt_in (B, T) = "
    "<bos> y_1..y_n, tgt_out (B, T) = y_1..y_n <eos>, both right-padded), S the longest "
    "source, T the longest target + 1",
    params=("sources", "targets"),
    outputs=("src", "src_len", "src_mask", "tgt_in", "tgt_out"),
    forbidden=(Forbidden("course_lib.data"), Forbidden("torch.nn.utils.rnn.pad_sequence"),
               Forbidden("course_lib.attention")),
    mistakes=[
        Mistake("the sources are padded on the left: put the characters first and the padding "
                "after them (the encoder packs right-padded rows)."),
        Mistake("tgt_in and tgt_out are swapped: the decoder READS <bos> y_1..y_n and must "
                "PREDICT y_1..y_n <eos>."),
        Mistake("the mask is inverted: True marks the real characters, False the padding."),
        Mistake("the longest target lost its <eos>: T is the longest target's length + 1."),
    ],
    hints=["Work out one example by hand first: for the targets '5' and '-17', write tgt_in and "
           "tgt_out as lists of ids, padding included.",
           "Fill tensors made with torch.full(..., PAD_ID) row by row; the mask compares a row "
           "of positions 0..S-1 with each length (broadcasting (1, S) against (B, 1))."],
)

check_a1_encoder = Check(
    "check_a1_encoder",
    "Encoder(vocab_size, emb_size, hidden_size), an nn.Module with `embed` (nn.Embedding, "
    "padding_idx PAD_ID) and `rnn` (nn.GRU, bidirectional, batch_first); forward(src (B, S), "
    "src_len (B,)) -> (memory (B, S, 2H), zero at padded positions; final (B, 2H) = [forward "
    "state after the last real character; backward state after reading back to the first]). "
    "The check loads its own weights into your class by these names",
    params=("config", "state", "src", "src_len"),
    outputs=("memory", "final"),
    call=_module_run,
    forbidden=(*_LIBRARY_MODELS,),
    mistakes=[
        Mistake("the GRU ran over the padding: the backward direction starts at the padding and "
                "the forward final state is taken after it. Pack the rows with their lengths."),
        Mistake("final is read at the last position S - 1, which is padding for the shorter "
                "rows: take the GRU's final states h_n instead."),
        Mistake("zeroing the padded positions afterwards is not enough: the backward direction "
                "still read the padding before the real characters."),
    ],
    hints=["Compare, for one short row, the backward direction's state at position 0 with what "
           "a GRU gives when it reads only that row's real characters, reversed.",
           "torch.nn.utils.rnn has the tools to hand a GRU rows of different lengths (mind "
           "enforce_sorted and total_length); h_n is (2, B, H), one row per direction."],
)

check_a1_additive_attention = Check(
    "check_a1_additive_attention",
    "AdditiveAttention(query_size, key_size, attn_size), an nn.Module with `W_q`, `W_k` "
    "(nn.Linear, no bias) and `v` (nn.Linear(attn_size, 1), no bias); forward(query (B, D_q), "
    "keys (B, S, D_k), mask (B, S) bool) -> (context (B, D_k), weights (B, S)): score_j = "
    "v(tanh(W_q query + W_k key_j)), weights the softmax over the real j (0 at padding), context "
    "the weighted sum of the keys",
    params=("config", "state", "query", "keys", "mask"),
    outputs=("context", "weights"),
    call=_module_run,
    forbidden=_ATTENTION,
    mistakes=[
        Mistake("the padded keys got weight: the mask was not applied."),
        Mistake("the padded scores were set to 0, but exp(0) = 1 still gives them weight: "
                "they need a score whose exponential is 0."),
        Mistake("the softmax ran over the batch (dim 0), not over the source positions."),
        Mistake("the tanh is missing: score_j = v(tanh(W_q query + W_k key_j))."),
    ],
    hints=["Check the shapes on paper: W_q query is (B, A) and W_k keys is (B, S, A); the sum "
           "needs the query broadcast over S.",
           "Each row of weights sums to 1 over its real positions and is exactly 0 at the "
           "padding: test that on a row with a single real key."],
)

check_a1_seq2seq_forward = Check(
    "check_a1_seq2seq_forward",
    "Seq2Seq(vocab_size, emb_size, hidden_size, attn_size) with `encoder` (your Encoder), "
    "`bridge` (nn.Linear(2H, 2H)), `attention` (your AdditiveAttention(2H, 2H, attn_size)), "
    "`embed` (nn.Embedding, padding_idx PAD_ID), `cell` (nn.GRUCell(emb_size + 2H, 2H)), `out` "
    "(nn.Linear(4H + emb_size, vocab_size)); forward(src, src_len, tgt_in (B, T)) -> (logits "
    "(B, T, V), weights (B, T, S)) with s_0 = tanh(bridge(final)), c_t, a_t = attention(s_{t-1}), "
    "s_t = cell([embed(y_{t-1}); c_t], s_{t-1}), logits_t = out([s_t; c_t; embed(y_{t-1})])",
    params=("config", "state", "src", "src_len", "tgt_in"),
    outputs=("logits", "weights"),
    call=_module_run,
    forbidden=(*_ATTENTION, Forbidden("course_lib.decoding")),
    mistakes=[
        Mistake("the output layer reads its inputs in another order: out([s_t; c_t; embed(y_{t-1})])."),
        Mistake("the decoder starts from zeros: s_0 = tanh(bridge(final))."),
        Mistake("the decoder attends to the padding: hand the source mask to your attention."),
    ],
    hints=["Write step(y_prev, h, memory, mask) -> (logits, h, weights) first and check its shapes "
           "on a batch of 2; forward loops over the T columns of tgt_in.",
           "The attention is queried with the state BEFORE the cell's step (Bahdanau's order); "
           "the output layer sees the state AFTER it."],
)

check_a1_sequence_loss = Check(
    "check_a1_sequence_loss",
    "fn(logits (B, T, V), tgt_out (B, T), pad_id) -> (loss, token_accuracy, sequence_accuracy), "
    "each a number: the mean cross-entropy over the positions whose target is not pad_id, the "
    "share of those where the argmax is the target, and the share of rows whose every real "
    "target is the argmax; log-probabilities written by hand, stable for large logits",
    params=("logits", "tgt_out", "pad_id"),
    outputs=("loss", "token_accuracy", "sequence_accuracy"),
    call=lambda fn, *args: _as_floats(fn(*args)),
    forbidden=(Forbidden(label="torch's cross-entropy / log-softmax (F.cross_entropy, F.nll_loss, "
                               "F.log_softmax)",
                         aten=("nll_loss_forward", "nll_loss2d_forward", "nll_loss_nd", "nll_loss",
                               "cross_entropy_loss", "_log_softmax", "log_softmax")),
               Forbidden("course_lib.seq2seq"), Forbidden("course_lib.train")),
    mistakes=[
        Mistake("the padding counts in the mean: average over the real targets only."),
        Mistake("each row was averaged first, then the rows: every real target weighs the same, "
                "so divide the masked sum by the number of real targets."),
        Mistake("exp(logits) overflows for large logits (inf / inf = nan): subtract each row's "
                "maximum before the exponential, or use logsumexp."),
        Mistake("the token accuracy counts the padding positions: count the real targets only."),
        Mistake("a row is right when its REAL targets are: the padding positions must not count "
                "in the sequence accuracy."),
    ],
    hints=["log p(y) = logit_y - log sum_v exp(logit_v); pick logit_y with gather.",
           "One boolean (B, T) tensor of the real positions serves all three numbers: a masked "
           "sum divided by its count, and for whole rows, 'right or padding' at every position."],
)


def _as_floats(out):
    if not isinstance(out, (tuple, list)) or len(out) != 3:
        raise WrongResult(f"return a tuple (loss, token_accuracy, sequence_accuracy), got "
                          f"{type(out).__name__}.")
    return tuple(torch.as_tensor(float(x), dtype=torch.float64) for x in out)  # NaN stays NaN


def _observe_training(fn, model, batches, steps, peak_lr, warmup, max_norm):
    losses = fn(model, batches, steps, peak_lr, warmup, max_norm)
    try:
        losses = torch.tensor([float(x) for x in losses])
    except (TypeError, ValueError):
        raise WrongResult("return the list of the steps' losses (numbers).") from None
    return {"losses": losses, "parameters": {k: v.detach().clone() for k, v in model.state_dict().items()}}


check_a1_train = Check(
    "check_a1_train",
    "fn(model, batches list of dicts (src, src_len, tgt_in, tgt_out), steps, peak_lr, warmup, "
    "max_norm) -> the list of the steps' losses: step t uses batches[t % len(batches)], Adam "
    "(default betas) at lr_t = peak_lr (t + 1) / warmup for t < warmup, then peak_lr (steps - t) "
    "/ (steps - warmup); the gradients scaled together by max_norm / (norm + 1e-6) when that is "
    "below 1 (norm: of all gradients as one vector); the loss your sequence_loss gives (compared: "
    "the losses and the parameters after the last step)",
    params=("model", "batches", "steps", "peak_lr", "warmup", "max_norm"),
    call=_observe_training,
    forbidden=(Forbidden("torch.nn.utils.clip_grad_norm_"), Forbidden("torch.nn.utils.clip_grad_norm"),
               Forbidden("torch.nn.utils.get_total_norm"), Forbidden("torch.nn.utils.clip_grads_with_norm_"),
               Forbidden("torch.optim.lr_scheduler"), Forbidden("course_lib.train"),
               Forbidden("course_lib.seq2seq_train")),
    mistakes=[
        Mistake("the warm-up starts at 0: step t = 0 already uses peak_lr * 1 / warmup."),
        Mistake("the learning rate was set after optimizer.step(): each step used the previous "
                "step's rate."),
        Mistake("each gradient was clipped on its own: the norm is that of all gradients "
                "together, and one factor scales them all."),
        Mistake("the gradients were never zeroed, so every step added to the last ones."),
        Mistake("the gradients were not clipped (or clipped before backward(), when they are "
                "still the old ones)."),
    ],
    hints=["Write lr_at(step, steps, peak_lr, warmup) and clip_gradients(parameters, max_norm) "
           "as two small functions and test them alone: lr_at over 10 steps with warmup 3, and "
           "the norm after clipping.",
           "Order inside a step: set the rate, forward, loss, zero the old gradients, backward, "
           "clip, update."],
)

check_a1_beam_search = Check(
    "check_a1_beam_search",
    "fn(step, state, bos_id, eos_id, beam_size, max_len, alpha) -> list of token ids (the best "
    "hypothesis, without bos and eos), for one source: step(y (k,), state (k, ...)) -> (logits "
    "(k, V), state); start from [bos] with state's one row; at each step extend every live "
    "hypothesis by every token and keep the beam_size best candidates by summed log-probability; "
    "a kept candidate ending in eos is finished; stop when none is live or after max_len steps "
    "(the live ones then count as finished); pick the finished one with the highest log p / "
    "|y|^alpha, |y| counting its eos",
    params=("step", "state", "bos_id", "eos_id", "beam_size", "max_len", "alpha"),
    call=lambda fn, *args: _token_list(fn(*args)),
    forbidden=(Forbidden("course_lib.decoding"), Forbidden("course_lib.seq2seq")),
    mistakes=[
        Mistake("the finished hypotheses were ranked by log p alone: divide by |y|^alpha, or "
                "short outputs always win."),
        Mistake("each hypothesis was extended by its own best token only: rank the candidates "
                "of all hypotheses together (a strong hypothesis may keep two)."),
        Mistake("|y| must count the eos token too."),
        Mistake("eos ends a hypothesis: it leaves the beam when eos is kept, it is not extended "
                "further."),
    ],
    hints=["Keep, for each live hypothesis, its tokens and its summed log-probability; the "
           "state's rows follow the hypotheses (index the state with the rows you keep).",
           "The candidates are a (k, V) table of scores: flatten it, take the top beam_size, and "
           "recover the row and the token of each by integer division and remainder."],
)


def _token_list(out):
    if isinstance(out, torch.Tensor):
        out = out.tolist()
    if not isinstance(out, (list, tuple)):
        raise WrongResult(f"return a list of token ids, got {type(out).__name__}.")
    return [int(x) for x in out]


check_a1_exact_match = Goal(
    "check_a1_exact_match",
    "the exact match of your trained model on 500 held-out expressions (never in any training "
    "set), decoded greedily by the check through your model's forward pass: at least 0.6. With "
    "the notebook's recipe (600 steps of 64) the reference build reached 0.83 to 0.88 (three "
    "training seeds, each measured on four held-out seeds)",
    quantity="the held-out exact match", at_least=0.6,
    measure=measure_exact_match,
    expects="your trained Seq2Seq model (the nn.Module itself)",
    forbidden=(*_ATTENTION, Forbidden("course_lib.decoding")),
    mistakes=[
        Mistake("the model trained on tgt_in as its target, or on targets that were not shifted"),
        Mistake("the learning rate never left the warm-up, or decays to 0 too early (print lr_at "
                "over the run)"),
        Mistake("the model is not in the form the check decodes: model(src, src_len, tgt_in) "
                "must return the logits (B, T, V) first"),
    ],
    hints=["The training loss should fall below 0.3 by the end of the run: print it every 100 steps.",
           "Decode a few training expressions yourself with your beam search: if they are wrong "
           "too, the training is the problem; if only the held-out ones are, the model memorised."],
)

check_a1_longer_prediction = Prediction(
    "check_a1_longer_prediction",
    "your prediction of the exact match on expressions of FOUR numbers (the model trained on "
    "two and three), against the measurement",
    quantity="the exact match on held-out four-number expressions", tolerance=within(abs=0.15),
    example=0.2,
    explanation=("attention lets the decoder find each number wherever it is, but the model must "
                 "still ADD: its recurrent states and its learned alignment have only ever seen "
                 "sources of at most 8 characters and sums of three terms, and a fourth term "
                 "needs an extra carry of information it never practised. Length generalisation "
                 "is a known weakness of these models (Lake and Baroni, 2018, the length split "
                 "of SCAN). The reference build wrote 0.15 to 0.22 of the four-number "
                 "expressions exactly (three training seeds), against 0.83 to 0.88 on two and "
                 "three numbers."),
    mistakes=[
        Mistake("attention reads every source position, but the arithmetic is learned only for "
                "the lengths seen: it does not carry over to a fourth term.",
                lambda measured: min(1.0, measured + 0.6)),
        Mistake("the model does not fail completely either: many four-term sums are still "
                "written right: attention finds the fourth number, and many sums need no new carry.",
                lambda measured: 0.0),
    ],
)
