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

import torch
from torch import nn

from ._compare import compare
from ._engine import Check, Mistake, WrongResult
from ._forbid import Forbidden
from .a3_task import (BPE, MODEL, PIECE, ToyLM, bpe_training_text, course_text,
                      heldout_bits_per_char, pieces, test_windows)
from .a3_train import (GOAL_BPC, check_a3_bits_per_char, check_a3_chars_per_token_prediction,
                       check_a3_heldout_bpc, check_a3_lr_schedule, check_a3_optimizer,
                       check_a3_sample_top_p, check_a3_train_step)

__all__ = ["GOAL_BPC", "PIECE", "ToyLM", "bpe_training_text", "check_a3_bits_per_char",
           "check_a3_bpe_train", "check_a3_chars_per_token_prediction", "check_a3_generate_cached",
           "check_a3_gpt", "check_a3_heldout_bpc", "check_a3_lr_schedule", "check_a3_optimizer",
           "check_a3_sample_top_p", "check_a3_tokenizer", "check_a3_train_step", "course_text",
           "heldout_bits_per_char", "pieces", "test_windows"]


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
    forbidden=BPE,
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
    forbidden=BPE,
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
    forbidden=MODEL,
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
    forbidden=(*MODEL, Forbidden("course_lib.decoding")),
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
