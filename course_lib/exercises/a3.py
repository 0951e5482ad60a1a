"""Checks of assignment 3, "A GPT end to end" (``assignments/a3_gpt_end_to_end.ipynb``).

The learner writes every piece of a small GPT language model: a byte-pair encoding trained on
the course's text, the model from tensor operations, a learning-rate schedule and an optimisation
step, bits per character on held-out text, generation with one key/value cache per block, and
nucleus sampling. The model is then trained and its held-out bits per character are measured by
the check itself (:data:`check_a3_heldout_bpc`) on windows of the test split that the learner's
notebook never reads.

Public pieces (not solutions): the split of a text into the pieces that BPE never merges across
(:func:`pieces`), the course text's splits (:func:`course_text`), the stretch of training text the
tokenizer is trained on (:func:`bpe_training_text`), a tiny causal language model the checks run
the learner's code on (:class:`ToyLM`), and the goal's measurement (:func:`heldout_bits_per_char`).
"""

from __future__ import annotations

import math
import re
from functools import cache

import torch
from torch import nn

from ._compare import compare, describe, within
from ._engine import Check, Goal, Mistake, Prediction, WrongResult
from ._forbid import Forbidden

__all__ = ["PIECE", "ToyLM", "bpe_training_text", "course_text", "heldout_bits_per_char",
           "pieces", "test_windows"]

# --------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------
PIECE = re.compile(r" ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+")
"""A word with the space before it, a number, a run of other symbols, a run of whitespace (a
run of spaces before a word leaves its last space to the word). Every character of a text falls
in exactly one piece: ``"".join(pieces(text)) == text``."""


def pieces(text: str) -> list[str]:
    """The pieces of ``text`` that byte-pair encoding never merges across (:data:`PIECE`).

    >>> pieces("The list  [1, 2]\\n")
    ['The', ' list', ' ', ' [', '1', ',', ' 2', ']', '\\n']
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return PIECE.findall(text)


@cache
def course_text(split: str) -> str:
    """The course's text (CPython's help pages, ``course_lib.data.load_text``), split 90/5/5 into
    "train", "val" and "test" by ``course_lib.data.split_text``: the same split as
    ``course_lib.data.char_corpus()``, as text rather than character ids."""
    from course_lib.data import load_text, split_text

    names = ("train", "val", "test")
    if split not in names:
        raise ValueError(f"split must be one of {names}, got {split!r}")
    return split_text(load_text())[names.index(split)]


def bpe_training_text(seed: int, n_chars: int = 150_000) -> str:
    """``n_chars`` consecutive characters of the training split, from a position drawn from
    ``seed`` (the assignment passes its variant's seed): the text the tokenizer is trained on."""
    train = course_text("train")
    if not 0 < n_chars <= len(train):
        raise ValueError(f"n_chars must be in 1..{len(train)}, got {n_chars}")
    g = torch.Generator().manual_seed(seed)
    start = int(torch.randint(0, len(train) - n_chars + 1, (1,), generator=g))
    return train[start:start + n_chars]


def test_windows(seed: int, n: int = 12, n_chars: int = 800) -> list[str]:
    """``n`` windows of ``n_chars`` characters of the TEST split, each starting at the start of a
    line, at positions drawn from ``seed`` (no two windows overlap)."""
    text = course_text("test")
    starts = [0] + [m.end() for m in re.finditer("\n", text[: len(text) - n_chars])]
    g = torch.Generator().manual_seed(seed)
    chosen: list[int] = []
    for i in torch.randperm(len(starts), generator=g).tolist():
        if all(abs(starts[i] - s) >= n_chars for s in chosen):
            chosen.append(starts[i])
        if len(chosen) == n:
            break
    return [text[s:s + n_chars] for s in sorted(chosen)]


# --------------------------------------------------------------------------------------
# A tiny causal language model the checks run the learner's code on (not a GPT)
# --------------------------------------------------------------------------------------
class ToyLM(nn.Module):
    """A small causal language model with a context of ``block_size`` tokens: each position reads
    its own token, its position and the mean of the embeddings of the tokens up to it.

        e_t = embed[x_t] + place[t];  c_t = mean(e_1..e_t);  logits_t = unembed(norm(e_t + tanh(mix(c_t))))

    ``unembed`` is tied to ``embed``. ``ids (B, T)`` with ``T <= block_size`` -> logits ``(B, T, V)``.
    """

    def __init__(self, vocab_size: int, block_size: int, width: int = 8):
        super().__init__()
        self.block_size = block_size
        self.embed = nn.Embedding(vocab_size, width)
        self.place = nn.Embedding(block_size, width)
        self.mix = nn.Linear(width, width)
        self.norm = nn.LayerNorm(width)
        self.unembed = nn.Linear(width, vocab_size, bias=False)
        self.unembed.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        length = ids.shape[-1]
        if length > self.block_size:
            raise ValueError(f"ToyLM reads at most block_size={self.block_size} tokens, got {length}")
        e = self.embed(ids) + self.place(torch.arange(length))                 # (B, T, C)
        c = e.cumsum(1) / torch.arange(1, length + 1)[:, None]                 # (B, T, C)
        return self.unembed(self.norm(e + torch.tanh(self.mix(c))))           # (B, T, V)


# --------------------------------------------------------------------------------------
# The goal's measurement (public: it reads the learner's model and tokenizer, nothing typed)
# --------------------------------------------------------------------------------------
def _parts(obj):
    """(model, tokenizer) from a pair, or from an object with .model and .tokenizer."""
    if isinstance(obj, (tuple, list)) and len(obj) == 2:
        model, tokenizer = obj
    elif hasattr(obj, "model") and hasattr(obj, "tokenizer"):
        model, tokenizer = obj.model, obj.tokenizer
    else:
        raise WrongResult("pass (model, tokenizer): your trained GPT and your Tokenizer, e.g. "
                          f"check_a3_heldout_bpc((model, tokenizer)); got {type(obj).__name__}.")
    if model is None or tokenizer is None:
        raise NotImplementedError("train the model (and the tokenizer) first")
    if not isinstance(model, nn.Module):
        raise WrongResult(f"the first of the pair must be your GPT (an nn.Module), got "
                          f"{type(model).__name__}.")
    if not (callable(getattr(tokenizer, "encode", None)) and callable(getattr(tokenizer, "decode", None))):
        raise WrongResult("the second of the pair must be your Tokenizer, with encode(text) and "
                          f"decode(ids); got {type(tokenizer).__name__}.")
    block = getattr(model, "block_size", None)
    if not isinstance(block, int) or block < 2:
        raise WrongResult("your GPT must keep its context length as an int attribute block_size, "
                          f"got {block!r}.")
    return model, tokenizer, block


def _chunk_logits(model, x: torch.Tensor) -> torch.Tensor:
    """The model's logits (1, T, V) for x (1, T), refusing a model that reads later tokens."""
    logits = model(x)
    if not isinstance(logits, torch.Tensor) or logits.dim() != 3 or logits.shape[:2] != x.shape:
        raise WrongResult(f"your GPT must map ids (B, T) = {tuple(x.shape)} to logits (B, T, V), "
                          f"got {describe(logits)}.")
    T = x.shape[1]
    if T > 1:  # causal: changing the tokens after position cut must not change the logits up to it
        cut = T // 2
        other = x.clone()
        other[0, cut + 1:] = (x[0, cut + 1:] + 1) % logits.shape[-1]
        if not torch.allclose(model(other)[0, :cut + 1], logits[0, :cut + 1], atol=1e-5, rtol=1e-4):
            raise WrongResult("your GPT's outputs at a position change when LATER tokens change: "
                              "its attention reads the future, so its bits per character would "
                              "be meaningless. Mask the scores of later positions.")
    return logits


def heldout_bits_per_char(obj, seed: int, n: int = 12, n_chars: int = 800) -> float:
    """The bits per character of a trained (model, tokenizer) on ``n`` windows of the test split
    drawn from ``seed`` (:func:`test_windows`).

    Each window is encoded by the learner's tokenizer, which must give the window back when
    decoding (else the count of characters would be wrong). Its tokens are read in consecutive
    chunks of the model's ``block_size``: every token but the window's first is predicted from
    the tokens before it in its chunk. The sum of -log2 p over the predicted tokens is divided by
    the number of characters they hold: the window's characters less those of its first token.
    """
    model, tokenizer, block = _parts(obj)
    was_training = model.training
    model.eval()
    bits, chars = 0.0, 0
    try:
        with torch.no_grad():
            for window in test_windows(seed, n, n_chars):
                ids = list(tokenizer.encode(window))
                if tokenizer.decode(ids) != window:
                    raise WrongResult("decode(encode(text)) is not the text on a held-out window: "
                                      f"{window[:60]!r}... The tokenizer must be lossless.")
                if len(ids) < 2 or not all(isinstance(i, int) and i >= 0 for i in ids):
                    raise WrongResult("encode(text) must return a list of token ids (ints >= 0) "
                                      "with at least two tokens for a window of text.")
                tokens = torch.tensor(ids)
                for start in range(0, len(ids) - 1, block):
                    x = tokens[start:start + block][None]                     # (1, T)
                    y = tokens[start + 1:start + block + 1]                   # (T',) T' <= T
                    logits = _chunk_logits(model, x)[0, : len(y)]       # (T', V)
                    if int(tokens.max()) >= logits.shape[-1]:
                        raise WrongResult(f"the tokenizer made id {int(tokens.max())}, but the "
                                          f"model scores {logits.shape[-1]} ids.")
                    logp = torch.log_softmax(logits.double(), -1)
                    bits -= float(logp.gather(1, y[:, None]).sum()) / math.log(2)
                chars += len(window) - len(tokenizer.decode(ids[:1]))
    finally:
        model.train(was_training)
    return bits / chars


# --------------------------------------------------------------------------------------
# What the parts may not call
# --------------------------------------------------------------------------------------
_SDPA_ATEN = ("scaled_dot_product_attention", "_scaled_dot_product_attention_math",
              "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention",
              "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
              "_native_multi_head_attention", "_transformer_encoder_layer_fwd")
_MODEL = (
    Forbidden("course_lib.gpt"), Forbidden("course_lib.multihead"),
    Forbidden("course_lib.attention"), Forbidden("course_lib.transformer"),
    Forbidden("torch.nn.MultiheadAttention"), Forbidden("torch.nn.Transformer"),
    Forbidden("torch.nn.TransformerEncoderLayer"), Forbidden("torch.nn.TransformerDecoderLayer"),
    Forbidden("torch.nn.TransformerEncoder"), Forbidden("torch.nn.TransformerDecoder"),
    Forbidden(label="F.scaled_dot_product_attention", aten=_SDPA_ATEN),
)
_BPE = (Forbidden("course_lib.bpe"), Forbidden("tokenizers", label="the Hugging Face tokenizers library"))


def _exact(label: str):
    """An exact comparison of ints, lists and strings that shows where they first differ."""
    def compare_exact(got, expected):
        if type(got) is tuple and type(expected) is list:
            got = list(got)
        if got == expected:
            return None
        if isinstance(got, (list, tuple)) and isinstance(expected, (list, tuple)):
            for i, (g, e) in enumerate(zip(got, expected)):
                if g != e:
                    return f"{label}: the first difference is at [{i}]: expected {e!r}, got {g!r}."
            return f"{label}: expected {len(expected)} items, got {len(got)}."
        return f"{label}: expected {expected!r:.200}, got {got!r:.200}."
    return compare_exact


# --------------------------------------------------------------------------------------
# Part 1: byte-pair encoding
# --------------------------------------------------------------------------------------
def _as_merges(fn, text, vocab_size):
    merges = fn(text, vocab_size)
    if not isinstance(merges, (list, tuple)):
        raise WrongResult(f"expected a list of merges (pairs of ids), got {type(merges).__name__}.")
    return [tuple(int(i) for i in pair) for pair in merges]


check_a3_bpe_train = Check(
    "check_a3_bpe_train",
    "fn(text, vocab_size) -> merges: a list of (left id, right id), merge k making token 256 + k, "
    "vocab_size - 256 of them (fewer if no pair is left). Base tokens: the 256 bytes, id = byte "
    "value; the text is cut by pieces(text) and each piece written as its UTF-8 bytes; pairs are "
    "counted inside pieces (a piece that occurs n times counts n times); each step merges the "
    "most frequent pair, ties to the smallest (left, right), in every piece, left to right",
    params=("text", "vocab_size"),
    call=_as_merges, compare=_exact("merges"),
    forbidden=_BPE,
    mistakes=[
        Mistake("each distinct piece is counted once: a piece that occurs n times in the text "
                "holds its pairs n times."),
        Mistake("pairs are counted across piece boundaries (the text read as one sequence): "
                "count and merge inside each piece of pieces(text) only."),
        Mistake("a tie goes to the wrong pair: among pairs of equal count, merge the smallest "
                "(left id, right id)."),
        Mistake("vocab_size counts the merges: the vocabulary is the 256 bytes plus the merges, "
                "so learn vocab_size - 256 of them."),
    ],
    hints=["Count the pieces once (a Counter of tuples of byte values); each step then counts "
           "the pairs of the distinct pieces, each weighted by how often its piece occurs.",
           "Merging rewrites every piece: walk it left to right, and where the pair starts, write "
           "the new id and jump two places. The new pieces may coincide: add their counts.",
           "Stop when 256 + len(merges) == vocab_size, or when every piece is a single token."],
)

def _tokenize(cls, merges, texts, expected_ids):
    """Build the learner's Tokenizer(merges), encode each text, decode each expected id list."""
    tokenizer = cls(merges)
    encoded = []
    for text in texts:
        ids = tokenizer.encode(text)
        if not isinstance(ids, (list, tuple)) or not all(isinstance(i, int) for i in ids):
            raise WrongResult(f"encode(text) must return a list of ints, got {type(ids).__name__}.")
        encoded.append(list(ids))
    return encoded, [tokenizer.decode(list(ids)) for ids in expected_ids]


check_a3_tokenizer = Check(
    "check_a3_tokenizer",
    "Tokenizer(merges), a class with encode(text) -> list of ids and decode(ids) -> text: encode "
    "cuts the text by pieces(text), writes each piece as its UTF-8 bytes and applies, while any "
    "applies, the earliest-learned merge present in the piece (everywhere in it); decode joins "
    "the tokens' bytes and reads them as UTF-8 (errors='replace'). Checked: encode on each text, "
    "and decode of each text's expected ids",
    params=("merges", "texts", "expected_ids"),
    call=_tokenize, compare=_exact("(encoded ids, decoded texts)"),
    forbidden=_BPE,
    mistakes=[
        Mistake("the pairs are merged as they come from left to right: among the pairs present, "
                "apply the merge learned EARLIEST first, wherever it is in the piece."),
        Mistake("the text is encoded as one sequence: merges must not cross the pieces of "
                "pieces(text), as in training."),
        Mistake("each token is decoded on its own: a character whose UTF-8 bytes fall in two "
                "tokens is then broken; join all the bytes first and decode once."),
        Mistake("only one round of merges is applied: repeat until no learned merge applies (a "
                "new token can form a learned pair with its neighbour)."),
    ],
    hints=["Keep the bytes of every token (token 256 + k is the bytes of merges[k]'s two tokens "
           "joined) and a dict from each pair to its rank k.",
           "Encode a piece in a loop: find the present pair of smallest rank, replace all its "
           "occurrences, stop when no present pair has a rank. Pieces repeat a lot: remember "
           "each piece's ids."],
)


# --------------------------------------------------------------------------------------
# Part 2: the model
# --------------------------------------------------------------------------------------
STATE_DICT_LAYOUT = """\
wte.weight (V, C)                      token embedding
wpe.weight (block_size, C)             position embedding
blocks.{i}.ln1.weight, .bias (C,)      LayerNorm before the attention
blocks.{i}.attn.qkv.weight (3C, C), .bias (3C,)   queries, keys, values (in that order)
blocks.{i}.attn.out.weight (C, C), .bias (C,)     output projection
blocks.{i}.ln2.weight, .bias (C,)      LayerNorm before the MLP
blocks.{i}.mlp.fc.weight (4C, C), .bias (4C,)
blocks.{i}.mlp.proj.weight (C, 4C), .bias (C,)
ln_f.weight, .bias (C,)                final LayerNorm
head.weight (V, C)                     the output head, the SAME Parameter as wte.weight"""


def _load(cls, config: dict, state: dict) -> nn.Module:
    """The learner's model class built with ``config``, holding the case's weights, in eval mode."""
    model = cls(**config)
    if not isinstance(model, nn.Module):
        raise WrongResult(f"{getattr(cls, '__name__', cls)}(**config) must make an nn.Module, "
                          f"got {type(model).__name__}.")
    mine = dict(model.state_dict())
    missing, extra = sorted(set(state) - set(mine)), sorted(set(mine) - set(state))
    if missing or extra:
        raise WrongResult("the parameters' names differ from the layout in the statement: "
                          f"missing {missing[:4]}, unexpected {extra[:4]}.")
    for key, value in state.items():
        if mine[key].shape != value.shape:
            raise WrongResult(f"{key} has shape {tuple(mine[key].shape)}, the layout says "
                              f"{tuple(value.shape)}.")
    model.load_state_dict(state)
    if getattr(model, "block_size", None) != config["block_size"]:
        raise WrongResult("keep the context length as the attribute block_size.")
    return model.eval()


def _gpt_outputs(cls, config, state, ids):
    model = _load(cls, config, state)
    with torch.no_grad():
        logits = model(ids)
    return logits, sum(p.numel() for p in model.parameters())


check_a3_gpt = Check(
    "check_a3_gpt",
    "GPT(vocab_size, block_size, n_layer, n_head, n_embd), an nn.Module mapping ids (B, T), "
    "T <= block_size, to logits (B, T, vocab_size): token plus position embeddings, n_layer "
    "pre-LN blocks (x + attn(ln1(x)), then x + mlp(ln2(x))) with causal multi-head "
    "self-attention (softmax(q k^T / sqrt(d_head)) v, later positions masked) and an MLP "
    "(fc, exact GELU, proj), a final LayerNorm and a head tied to the token embedding. "
    "Parameters named as in STATE_DICT_LAYOUT; the check loads its weights into your model and "
    "compares the logits and the number of parameters",
    params=("config", "state_dict", "ids"),
    call=_gpt_outputs, outputs=("logits", "number of parameters"),
    forbidden=_MODEL,
    mistakes=[
        Mistake("the attention reads later positions: mask the scores of keys after the query "
                "(set them to -inf before the softmax)."),
        Mistake("the blocks normalise after the residual sum (post-LN, x = ln(x + f(x))): this "
                "GPT is pre-LN, x + f(ln(x)), with one final LayerNorm before the head."),
        Mistake("the scores are not divided by sqrt(d_head) (the width of ONE head)."),
        Mistake("the head is a separate matrix: tie it (self.head.weight = self.wte.weight), so "
                "the model has V x C fewer parameters."),
        Mistake("the final LayerNorm ln_f is missing before the head."),
        Mistake("the heads are cut wrongly: head j is columns j*d_head .. (j+1)*d_head - 1 of "
                "each of q, k and v, i.e. view(B, T, n_head, d_head).transpose(1, 2)."),
    ],
    hints=["Build it bottom up and test each module on random input: the attention's output "
           "has the input's shape, and its output at position t must not change when you change "
           "the tokens after t.",
           "Split qkv(x) (B, T, 3C) into q, k, v of (B, T, C), then each into heads "
           "(B, n_head, T, d_head); the scores are (B, n_head, T, T), masked above the diagonal.",
           "Tying: after creating head = nn.Linear(C, V, bias=False), assign head.weight = "
           "wte.weight; parameters() then lists it once."],
)


# --------------------------------------------------------------------------------------
# Part 3: the schedule, the optimiser, one step
# --------------------------------------------------------------------------------------
def _schedule(fn, steps, max_lr, warmup, total, min_lr):
    rates = []
    for step in steps:
        lr = fn(step, max_lr, warmup, total, min_lr)
        if isinstance(lr, torch.Tensor) and lr.numel() == 1:
            lr = lr.item()
        if isinstance(lr, bool) or not isinstance(lr, (int, float)):
            raise WrongResult(f"the rate at step {step} must be a number, got {type(lr).__name__}.")
        rates.append(float(lr))
    return torch.tensor(rates, dtype=torch.float64)


check_a3_lr_schedule = Check(
    "check_a3_lr_schedule",
    "fn(step, max_lr, warmup, total, min_lr) -> the learning rate at step (0-based): "
    "max_lr * (step + 1) / warmup for step < warmup; then a half cosine from max_lr at step = "
    "warmup down to min_lr at step = total, min_lr + (max_lr - min_lr) * (1 + cos(pi * "
    "(step - warmup) / (total - warmup))) / 2; min_lr after total. Checked on a range of steps",
    params=("steps", "max_lr", "warmup", "total", "min_lr"),
    call=_schedule,
    forbidden=(Forbidden("torch.optim.lr_scheduler"), Forbidden("course_lib.train.warmup_cosine")),
    mistakes=[
        Mistake("the warmup starts at 0: step 0 must already train, at max_lr / warmup "
                "((step + 1) / warmup)."),
        Mistake("the cosine runs over all the steps (step / total) instead of the steps after "
                "the warmup ((step - warmup) / (total - warmup)): the rate jumps at the warmup's end."),
        Mistake("the cosine ends at 0 instead of min_lr: scale it between min_lr and max_lr."),
        Mistake("after total the rate goes up again (the cosine's next half): hold it at min_lr."),
    ],
    hints=["Three regimes: step < warmup, warmup <= step < total, step >= total. Plot your rate "
           "for 100 steps with warmup 10 before you check.",
           "In the middle regime the progress p = (step - warmup) / (total - warmup) goes from 0 "
           "to 1; (1 + cos(pi p)) / 2 goes from 1 to 0."],
)


def _decays(fn, model, lr, weight_decay):
    optimizer = fn(model, lr, weight_decay)
    if not isinstance(optimizer, torch.optim.AdamW):
        raise WrongResult(f"expected a torch.optim.AdamW, got {type(optimizer).__name__}.")
    names = {id(p): name for name, p in model.named_parameters()}
    decay: dict[str, float] = {}
    for group in optimizer.param_groups:
        for p in group["params"]:
            name = names.get(id(p))
            if name is None:
                raise WrongResult("a parameter group holds a tensor that is not one of the "
                                  "model's parameters.")
            decay[name] = float(group["weight_decay"])
            if group["lr"] != lr:
                raise WrongResult(f"the group of {name} has lr {group['lr']}, expected {lr}.")
    if set(decay) != set(names.values()):
        raise WrongResult(f"some parameters are in no group: {sorted(set(names.values()) - set(decay))}.")
    return decay


check_a3_optimizer = Check(
    "check_a3_optimizer",
    "fn(model, lr, weight_decay) -> torch.optim.AdamW over all the model's parameters, with "
    "weight decay on the matrices (every parameter with 2 or more dimensions: linear weights and "
    "embeddings) and none on the vectors (biases, LayerNorm weights). Checked: the decay each "
    "parameter gets, by name",
    params=("model", "lr", "weight_decay"),
    call=_decays,
    no_shortcut="no torch or course_lib function splits the parameters this way",
    mistakes=[
        Mistake("every parameter is decayed: biases and LayerNorm gains are vectors and take no "
                "weight decay."),
        Mistake("the parameters were split by name ('weight' decayed): a LayerNorm's weight is a "
                "vector and takes no decay; split by p.dim()."),
        Mistake("no parameter is decayed: the matrices (dim >= 2) take weight_decay."),
    ],
    hints=["Two groups, [{'params': matrices, 'weight_decay': weight_decay}, {'params': vectors, "
           "'weight_decay': 0.0}], passed to AdamW with lr.",
           "model.parameters() lists a tied weight once; test p.dim() >= 2."],
)


def _one_step(fn, model, x, y, max_norm, stale):
    """fn(model, optimizer, x, y, max_norm) with SGD(lr=0.5) and stale gradients left in .grad."""
    for p, g in zip(model.parameters(), stale):
        p.grad = g.clone()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    out = fn(model, optimizer, x, y, max_norm)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise WrongResult("return (loss, grad_norm): two numbers.")
    loss, norm = (float(v.item()) if isinstance(v, torch.Tensor) else v for v in out)
    return loss, norm, {k: v.detach().clone() for k, v in model.state_dict().items()}


check_a3_train_step = Check(
    "check_a3_train_step",
    "fn(model, optimizer, x, y, max_norm) -> (loss, grad_norm): one optimisation step on a batch "
    "(x, y), each (B, T): the mean cross-entropy of model(x) (B, T, V) against y over all B*T "
    "positions; clear the old gradients, backpropagate, compute the global L2 norm of all "
    "gradients and, if it exceeds max_norm, scale them all by max_norm / (norm + 1e-6); then "
    "optimizer.step(). Returns the loss and the norm BEFORE clipping, as floats",
    params=("model", "x", "y", "max_norm", "stale_grads"),
    call=_one_step, outputs=("loss", "grad_norm", "the weights after the step"),
    forbidden=(Forbidden("torch.nn.utils.clip_grad"),
               Forbidden(label="torch.nn.utils.clip_grad_norm_", aten=("_foreach_norm",))),
    mistakes=[
        Mistake("the old gradients are not cleared: backward adds to .grad, so call "
                "optimizer.zero_grad() first."),
        Mistake("the gradients are clipped after optimizer.step(): clip between backward and step."),
        Mistake("each parameter's gradient is clipped on its own: clip by the ONE norm of all "
                "gradients together, sqrt(sum of every squared entry)."),
        Mistake("the norm returned is the one after clipping: return the norm measured before."),
    ],
    hints=["The order: loss, zero_grad, backward, norm, scale, step.",
           "norm = sqrt(sum over parameters of (p.grad ** 2).sum()); scale every p.grad in place "
           "by min(1, max_norm / (norm + 1e-6))."],
)


# --------------------------------------------------------------------------------------
# Part 4: bits per character
# --------------------------------------------------------------------------------------
def _bpc(fn, model, ids, n_chars, stride):
    with torch.no_grad():
        value = fn(model, ids, n_chars, stride)
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise WrongResult(f"expected a float (bits per character), got {type(value).__name__}.")
    return float(value)


check_a3_bits_per_char = Check(
    "check_a3_bits_per_char",
    "fn(model, ids, n_chars, stride) -> float: the bits per character of a token sequence ids (N,) "
    "under a causal model with context model.block_size, scored with a sliding window: window "
    "w reads ids[w*stride : w*stride + block_size] and predicts the next token at each place; "
    "the first window scores all its predictions, each later one only the targets no earlier "
    "window scored; stop once ids[N-1] is scored. The sum of -log2 p(target) over ids[1:] "
    "divided by n_chars, the number of characters that ids[1:] holds",
    params=("model", "ids", "n_chars", "stride"),
    call=_bpc,
    forbidden=(Forbidden("course_lib.train"), Forbidden("course_lib.bpe"),
               Forbidden("course_lib.exercises.a3.heldout_bits_per_char")),
    mistakes=[
        Mistake("this is bits per TOKEN: divide the total by the number of characters n_chars, "
                "not by the number of tokens predicted."),
        Mistake("this is in nats: divide the natural-log loss by ln 2."),
        Mistake("the windows do not overlap (stride ignored, windows of block_size): with a "
                "stride shorter than block_size each later window scores only its last targets, "
                "which then see a longer context."),
        Mistake("targets are scored more than once: a later window scores only the targets after "
                "the last one scored so far."),
    ],
    hints=["Track the index of the last target scored; for each window, cross-entropy with "
           "reduction='sum' over the targets after it.",
           "Windows start at 0, stride, 2 * stride, ...; a window's targets are "
           "ids[start + 1 : start + block_size + 1]; stop after the window that reaches the end."],
)


# --------------------------------------------------------------------------------------
# Part 5: generation with one key/value cache per block
# --------------------------------------------------------------------------------------
def _generate_counted(cls, config, state, prompt, num_tokens):
    """Build the learner's CachedGPT with the case's weights, generate, and count the rows (B x
    tokens) each block's attn.qkv projects."""
    model = _load(cls, config, state)
    if not callable(getattr(model, "generate", None)):
        raise WrongResult("your class needs a method generate(prompt, num_tokens).")
    rows = [0] * len(model.blocks)

    def counter(i):
        def hook(module, inputs, output):
            rows[i] += inputs[0].shape[:-1].numel()
        return hook

    hooks = [block.attn.qkv.register_forward_hook(counter(i)) for i, block in enumerate(model.blocks)]
    try:
        with torch.no_grad():
            tokens = model.generate(prompt, num_tokens)
    finally:
        for hook in hooks:
            hook.remove()
    if not isinstance(tokens, torch.Tensor):
        raise WrongResult(f"generate must return a tensor of ids, got {type(tokens).__name__}.")
    return {"tokens": tokens, "rows": rows}


def _same_tokens_one_row_each(got, expected):
    problem = compare(got["tokens"], expected["tokens"], "tokens")
    if problem:
        return problem
    batch = expected["tokens"].shape[0]
    for i, (g, e) in enumerate(zip(got["rows"], expected["rows"])):
        if g == 0:
            return (f"block {i} never called its attn.qkv: project the new token with the "
                    "block's own attn.qkv module.")
        if g > e + batch:
            return (f"the tokens are right, but block {i} projected {g} rows (B x tokens) where a "
                    f"cache needs {e}: each step must project only the newest token.")
    return None


check_a3_generate_cached = Check(
    "check_a3_generate_cached",
    "CachedGPT, a subclass of your GPT, with generate(prompt (B, P), num_tokens) -> (B, P + "
    "num_tokens): greedy generation that keeps one key/value cache per block, so that each block "
    "projects each token once (the check counts the rows each block's attn.qkv projects) and "
    "writes the same tokens as greedy generation without a cache. P + num_tokens <= block_size",
    params=("config", "state_dict", "prompt", "num_tokens"),
    call=_generate_counted, compare=_same_tokens_one_row_each,
    forbidden=(*_MODEL, Forbidden("course_lib.decoding")),
    mistakes=[
        Mistake("every step re-reads the whole sequence: keep each block's keys and values and "
                "feed only the newest token."),
        Mistake("the new token's position is its place in the whole sequence (wpe of P + t), "
                "not 0."),
        Mistake("return the prompt followed by the new tokens, (B, P + num_tokens)."),
        Mistake("the cache holds only the newest key and value: append them to the cache's "
                "keys and values along the time dimension."),
    ],
    hints=["A cached block step: x (B, 1, C) -> project q, k, v of the new token, concatenate k "
           "and v to the block's cache (B, h, t, d) -> (B, h, t + 1, d), attend with the new query "
           "to all of them (no mask is needed), then the residuals and the MLP as in forward.",
           "Feed the prompt's tokens one by one (or all at once, filling every cache) and from "
           "the prompt's last token on append the argmax of head(ln_f(x)) of the last position."],
)


# --------------------------------------------------------------------------------------
# Part 6: nucleus sampling
# --------------------------------------------------------------------------------------
def _sample(fn, logits, temperature, top_p, seed):
    g = torch.Generator().manual_seed(seed)
    ids = fn(logits.clone(), temperature, top_p, g)
    if not isinstance(ids, torch.Tensor):
        raise WrongResult(f"expected a tensor of ids (B,), got {type(ids).__name__}.")
    return ids


check_a3_sample_top_p = Check(
    "check_a3_sample_top_p",
    "fn(logits (B, V), temperature, top_p, generator) -> ids (B,) long: p = softmax(logits / "
    "temperature); keep the smallest set of most probable ids whose probabilities sum to at "
    "least top_p (an id is kept if the ids more probable than it sum to less than top_p), zero "
    "the others, and draw one id per row with ONE call torch.multinomial(kept, 1, "
    "generator=generator) on the kept probabilities in vocabulary order (B, V). Temperature 0: "
    "the argmax, no draw",
    params=("logits", "temperature", "top_p", "seed"),
    call=_sample,
    forbidden=(Forbidden("course_lib.decoding"),),
    mistakes=[
        Mistake("the id that crosses top_p is dropped: keep every id whose MORE probable ids sum "
                "to less than top_p (the crossing one included), so at least one is always kept."),
        Mistake("the draw returns a position in the SORTED order: scatter the kept probabilities "
                "back to vocabulary order before torch.multinomial (or map the position back)."),
        Mistake("the nucleus is chosen before the temperature: divide the logits by the "
                "temperature first, then cut by top_p."),
        Mistake("temperature 0 must give the argmax without dividing by zero."),
    ],
    hints=["Sort the probabilities in descending order; the cumulative sum MINUS each one's own "
           "probability says how much the ids before it hold.",
           "Build a mask in sorted order, then put it back in vocabulary order with scatter (or "
           "index with the sort's indices)."],
)


# --------------------------------------------------------------------------------------
# The goal and the prediction
# --------------------------------------------------------------------------------------
GOAL_BPC = 2.45

check_a3_heldout_bpc = Goal(
    "check_a3_heldout_bpc",
    f"the bits per character of your trained GPT and your tokenizer on held-out windows of the "
    f"course text's TEST split, measured by the check (heldout_bits_per_char): at most "
    f"{GOAL_BPC} (the notebook's budget, 800 steps; the reference build reached 1.97 to 2.18 over "
    f"three training seeds, each measured on four held-out seeds; the characters' frequencies "
    f"alone give 4.69)",
    quantity="the held-out bits per character", at_most=GOAL_BPC,
    measure=heldout_bits_per_char,
    expects="(model, tokenizer): your trained GPT (with block_size) and your Tokenizer",
    forbidden=_MODEL,
    mistakes=[
        Mistake("the training loss is computed against the inputs x instead of the next tokens y"),
        Mistake("the learning rate is never set from your schedule (set each group's lr before "
                "every step), or the warmup never ends"),
        Mistake("the model trains on too little: check that the training ids are the WHOLE "
                "training split encoded by your tokenizer"),
    ],
    hints=["Print the training loss every 100 steps: in nats per token it should be near 3.5 by "
           "step 400 and near 3.0 at the end.",
           "Measure your model with your bits_per_char on the validation split first: it should "
           "be close to the check's value on the test split."],
)

check_a3_chars_per_token_prediction = Prediction(
    "check_a3_chars_per_token_prediction",
    "your prediction of the characters per token of your tokenizer (vocabulary 512, trained on "
    "150,000 characters of the training split) on the validation split, against the measurement",
    quantity="characters per token on the validation split", tolerance=within(rel=0.2),
    example=2.1,
    explanation=("256 merges buy the commonest pieces of this text: single letters joined into "
                 "frequent words and word parts (' the', ' of', 'ing'), runs of spaces of the "
                 "indented code examples, and frequent symbols; most other words are cut into two "
                 "to four pieces. The help pages are about half code and tables, whose names and "
                 "punctuation compress less than prose. About 2 characters per token is typical "
                 "here (2.1 on the validation split with the published variant's tokenizer); GPT-2's "
                 "50,000 merges reach about 4 on English prose."),
    mistakes=[
        Mistake("a vocabulary of 512 holds 256 merges, enough for the commonest words and pieces, "
                "not for whole words in general: GPT-2's 4 characters per token take 50,000 "
                "merges.", lambda measured: 4.0),
        Mistake("the merges do shorten the text: the commonest pairs cover a large share of it, "
                "so a token holds on average clearly more than one character.",
                lambda measured: 1.2),
    ],
    hints=["How many merges are there, and which pairs of this text are the commonest?",
           "The text is half prose and half code examples and tables."],
)
