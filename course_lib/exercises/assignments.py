"""Checks for the multi-part assignments (``assignments/`` in the course's repository).

Each assignment builds a model from parts checked by the chapters' records (``check_gru_cell``,
``check_decoder_layer``, ``check_kv_cache_step``, ...), trains it, and measures it. The records
here are what only the assignments need: the goals a trained model must reach (each bar well
below what a correct build reaches on every seed tried, so that it holds on any CPU), the
predictions made before training, and a check of cached generation.
"""

from __future__ import annotations

import torch

from ._compare import compare, within
from ._engine import Check, Goal, Mistake, Prediction, WrongResult
from ._forbid import Forbidden

# --------------------------------------------------------------------------------------
# Assignment 1: a sequence-to-sequence model with attention, from its parts
# --------------------------------------------------------------------------------------
check_dates_seq2seq_exact_match = Goal(
    "check_dates_seq2seq_exact_match",
    "the held-out exact match of the encoder-decoder built from your parts after 100 steps: at "
    "least 0.6 (a correct build reached 0.81 to 0.87 over five seeds)",
    quantity="the held-out exact match", at_least=0.6,
    mistakes=[
        Mistake("the loss is computed against tgt_in instead of tgt_out (the model then learns to "
                "copy its input)"),
        Mistake("the optimiser is created inside the loop (Adam's moments restart every step)"),
        Mistake("zero_grad is missing, so the gradients of every step add up"),
    ],
    hints=["Print the loss every 20 steps: it should fall below 0.3 well before step 100.",
           "If every part passed its check, the training loop is what is left: compare it line by "
           "line with the statement."],
)

check_exact_match_prediction = Prediction(
    "check_exact_match_prediction",
    "your prediction of the held-out exact match after 100 steps, against the measurement",
    quantity="the held-out exact match after 100 steps", tolerance=within(abs=0.15),
    example=0.84,
    explanation=("100 steps of batches of 64 are about two passes over the 3000 training dates, "
                 "and with attention each output character needs to find only one or two source "
                 "characters: the model writes most dates exactly right (0.81 to 0.87 over five "
                 "seeds). The mistakes left are mostly one wrong digit of the day or the month, "
                 "which the exact match counts as a whole date wrong; the per-character accuracy "
                 "is far higher. Chapter 4 trains larger models longer and reaches 0.99."),
    mistakes=[
        Mistake("an exact match counts a date right only if all 10 characters are; but attention "
                "makes each character easy, so after two passes most dates are whole.",
                lambda measured: 0.1),
        Mistake("two passes over the data do not make it perfect: the rarer days and months are "
                "still confused.", lambda measured: 1.0),
    ],
)


# --------------------------------------------------------------------------------------
# Assignment 2: a Transformer decoder from its parts, trained on dates
# --------------------------------------------------------------------------------------
check_dates_transformer_exact_match = Goal(
    "check_dates_transformer_exact_match",
    "the held-out exact match of the Transformer whose decoder is made of your parts, after 200 "
    "steps: at least 0.75 (a correct build reached 0.93 to 0.96 over five seeds)",
    quantity="the held-out exact match", at_least=0.75,
    mistakes=[
        Mistake("the model was trained on tgt_in instead of your shifted tgt_out, or on targets "
                "that are not shifted (it then learns to copy its input)"),
        Mistake("the decoder is evaluated in training mode or with gradients on (call model.eval() "
                "and decode under torch.no_grad())"),
    ],
    hints=["Every part passed its check, so look at what the given cells feed them: print one "
           "batch's decoder input next to its target.",
           "The loss after 200 steps should be below 0.05."],
)

check_transformer_exact_match_prediction = Prediction(
    "check_transformer_exact_match_prediction",
    "your prediction of the Transformer's held-out exact match after 200 steps, against the "
    "measurement",
    quantity="the held-out exact match after 200 steps", tolerance=within(abs=0.15),
    example=0.96,
    explanation=("the dates are short and each output field reads one source field, which "
                 "attention finds directly: after four passes over the data the Transformer "
                 "writes 0.93 to 0.96 of the held-out dates exactly (five seeds). It has to learn "
                 "from the positional code where each field starts, which a recurrent encoder "
                 "gets from reading in order, but its parallel attention is also what makes a "
                 "training step cheap: 200 of its steps cost about a second here."),
    mistakes=[
        Mistake("a Transformer does not need far more data than a recurrent model on a task this "
                "short: one layer each way with attention over the whole source is enough.",
                lambda measured: 0.3),
        Mistake("with no recurrence the positions come from the positional code only, but the "
                "model learns them quickly here: most dates come out exactly right.",
                lambda measured: 0.6),
    ],
)


# --------------------------------------------------------------------------------------
# Assignment 3: a GPT with key/value-cache generation
# --------------------------------------------------------------------------------------
def _generate_observed(fn, model, prompt, num_tokens):
    """Run fn(model, prompt, num_tokens) without gradients, counting the rows (tokens) that each
    block's attention projects into queries, keys and values: {"tokens", "rows"}."""
    rows = [0] * len(model.transformer.h)

    def counter(i):
        def hook(module, inputs, output):
            rows[i] += inputs[0].shape[:-1].numel()                   # B * T of this call
        return hook

    hooks = [block.attn.c_attn.register_forward_hook(counter(i))
             for i, block in enumerate(model.transformer.h)]
    try:
        with torch.no_grad():
            tokens = fn(model, prompt, num_tokens)
    finally:
        for hook in hooks:
            hook.remove()
    if not isinstance(tokens, torch.Tensor):
        raise WrongResult(f"expected a tensor of token ids, got {type(tokens).__name__}.")
    return {"tokens": tokens, "rows": rows}


def _same_tokens_no_more_work(got, expected):
    problem = compare(got["tokens"], expected["tokens"], "tokens")
    if problem:
        return problem
    batch = expected["tokens"].shape[0]
    for i, (g, e) in enumerate(zip(got["rows"], expected["rows"])):
        if g > e + batch:
            return (f"the tokens are right, but block {i} projected {g} rows (B x tokens) where a "
                    f"cache needs {e}: every step re-reads the sequence instead of the new token.")
    return None


check_generate_cached = Check(
    "check_generate_cached",
    "fn(model a course_lib GPT, prompt (B, P), num_tokens) -> (B, P + num_tokens): greedy "
    "generation that keeps each block's keys and values, so that each step projects only the "
    "newest token (compared with the tokens of uncached greedy decoding, and the rows each block "
    "projects counted)",
    params=("model", "prompt", "num_tokens"),
    call=_generate_observed, compare=_same_tokens_no_more_work,
    forbidden=(Forbidden("course_lib.gpt.kv_cache_step"), Forbidden("course_lib.gpt.GPT.generate"),
               Forbidden("course_lib.gpt.GPT.step"), Forbidden("course_lib.decoding.decode"),
               Forbidden("course_lib.multihead.KVCache.extend", label="course_lib.multihead.KVCache")),
    mistakes=[
        Mistake("every step re-reads the whole sequence (model(ids)): keep each block's keys and "
                "values and feed only the newest token."),
        Mistake("the new token's position is its place in the whole sequence (wpe of P + t), not 0."),
        Mistake("return the prompt followed by the new tokens, (B, P + num_tokens)."),
        Mistake("the attention's output replaces x instead of being added to it: a block is "
                "x + attn(ln_1(x)), then x + mlp(ln_2(x)) (the residual stream)."),
    ],
    hints=["Feed the tokens one at a time, the prompt's first: each step embeds one token at its "
           "position, runs it through every block, and leaves in each block's cache the keys and "
           "values of all tokens so far.",
           "A block is x + attn(ln_1(x)), then x + mlp(ln_2(x)): replace the attention by your cached "
           "step on block.attn, one cache per block.",
           "Only the steps from the prompt's last token on produce a new token (the argmax of "
           "lm_head(ln_f(x)) at the last position)."],
)

check_gpt_heldout_bpc = Goal(
    "check_gpt_heldout_bpc",
    "the held-out bits per character of the tiny GPT after 150 steps, measured with your function: "
    "at most 4.0 (the unigram frequencies alone give 4.69; a correct build reached 3.47 to 3.51 "
    "over three seeds)",
    quantity="the held-out bits per character", at_most=4.0,
    mistakes=[
        Mistake("the loss or the bits were computed against the inputs x instead of the next "
                "characters y"),
        Mistake("the model is evaluated on the training split, or in training mode"),
    ],
    hints=["Check your bits-per-character function on a uniform model: log2(V) bits.",
           "The training loss (in nats) after 150 steps should be near 2.4: divide by ln 2 and "
           "compare."],
)

check_cache_rows_prediction = Prediction(
    "check_cache_rows_prediction",
    "your prediction of how many times more rows (tokens) each block projects without a cache "
    "than with one, for a prompt of 8 and 24 new tokens, against the count",
    quantity="rows without a cache / rows with one (prompt 8, 24 new tokens)",
    tolerance=within(factor=1.3), example=468 / 31,
    explanation=("with a cache each token is projected once: 8 + 24 - 1 = 31 rows per block (the "
                 "last new token is never fed back). Without one, the step that writes token t "
                 "re-reads the whole prefix: 8, 9, ..., 31 tokens, 24 * 8 + 24 * 23 / 2 = 468 rows, "
                 "15 times more. The ratio grows with the length (about n / 2 for n tokens after a "
                 "short prompt); the attention's score work grows even faster, quadratic per step "
                 "without a cache, linear with one."),
    mistakes=[
        Mistake("the uncached loop does not re-read the final sequence at every step: its prefix "
                "grows from 8 to 31 tokens, about 20 on average.", lambda measured: 24.0),
        Mistake("the cache does not change the tokens, but it changes the work: without it every "
                "earlier token is projected again at every step.", lambda measured: 1.0),
    ],
)
