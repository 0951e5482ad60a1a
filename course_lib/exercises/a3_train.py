"""Checks of assignment 3's parts 3, 4 and 6 (``assignments/a3_gpt_end_to_end.ipynb``): the
learning-rate schedule, the optimiser, one training step, bits per character, nucleus sampling;
then the goal (the held-out bits per character of the learner's trained model) and the
prediction. Parts 1, 2 and 5 (the tokenizer, the model, cached generation) are in ``a3.py``,
which re-exports these records.
"""

from __future__ import annotations

import torch

from ._compare import within
from ._engine import Check, Goal, Mistake, Prediction, WrongResult
from ._forbid import Forbidden
from .a3_task import MODEL, heldout_bits_per_char

__all__ = ["GOAL_BPC", "check_a3_bits_per_char", "check_a3_chars_per_token_prediction",
           "check_a3_heldout_bpc", "check_a3_lr_schedule", "check_a3_optimizer",
           "check_a3_sample_top_p", "check_a3_train_step"]


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
    forbidden=MODEL,
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
