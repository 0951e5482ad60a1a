"""Checks of assignment 2's parts 5 to 7 (``assignments/a2_transformer_from_blank.ipynb``): the
label-smoothed loss, the learning-rate schedule, the training step, greedy decoding, then the goal
(the held-out exact match of the learner's trained model) and the prediction before it. Parts 1
to 4 (the model) are in ``a2.py``, which re-exports these records.
"""

from __future__ import annotations

import torch

from ._compare import compare, within
from ._engine import Check, Goal, Mistake, Prediction, WrongResult
from ._forbid import Forbidden
from .a2_task import DECODERS, FROM_BLANK, LOSSES, SCHEDULES, ToySeq2Seq, measure_exact_match

__all__ = ["check_a2_exact_match", "check_a2_exact_match_prediction", "check_a2_greedy_decode",
           "check_a2_lr_schedule", "check_a2_smoothed_loss", "check_a2_train_step"]


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
