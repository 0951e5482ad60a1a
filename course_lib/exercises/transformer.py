"""Checks for chapter 9, "The Transformer"."""

from __future__ import annotations

import torch

from ._compare import compare, within
from ._engine import Check, Mistake, Prediction, no_grad
from ._forbid import Forbidden

# --------------------------------------------------------------------------------------
# the decoder input, shifted right
# --------------------------------------------------------------------------------------
def _shifted_left(args, kwargs, got, expected):
    """A left shift, whatever fills the last column."""
    tgt = args[0]
    if (isinstance(got, torch.Tensor) and got.shape == tgt.shape and tgt.shape[1] > 1
            and torch.equal(got[:, :-1], tgt[:, 1:])):
        return "this shifts LEFT (the decoder would read the token it must predict): shift right."
    return None


check_shift_right = Check(
    "check_shift_right",
    "fn(tgt (B, T) ids, bos_id) -> (B, T): <bos> then tgt without its last token",
    params=("tgt", "bos_id"),
    diagnose=_shifted_left,
    mistakes=[
        Mistake("the result is one column too long: drop the last token of tgt after adding <bos>."),
        Mistake("this shifts LEFT (the decoder would read the token it must predict): shift right."),
        Mistake("<bos> goes at the START of every row, not the end."),
    ],
    hints=["The decoder reads <bos> y_1 ... y_{n-1} while it must predict y_1 ... y_n.",
           "Put a column of bos_id in front and drop the last column, so that the shape stays "
           "(B, T)."],
    forbidden=(Forbidden("course_lib.transformer.shift_right"),),
)


# --------------------------------------------------------------------------------------
# the decoder layer's forward pass (post-LN)
# --------------------------------------------------------------------------------------
def _position_spread(args, kwargs, got, expected):
    """On a case whose memory is one vector repeated at every source position (cross-attention
    then gives every target position the same vector): how much the learner's output rows still
    differ across target positions, against a right layer's. Where they do not differ, what the
    decoder read so far (x) does not reach the output."""
    x, memory = args[1], args[2]
    if not (isinstance(got, torch.Tensor) and got.shape == expected.shape
            and bool((memory == memory[:, :1]).all())):
        return None
    yours = (got - got[:, :1]).abs().amax().item()
    right = (expected - expected[:, :1]).abs().amax().item()
    if yours > 0.1 * right:
        return None
    return (f"on this case the memory is one vector repeated at all {memory.shape[1]} source "
            f"positions; the rows of your output differ across the {x.shape[1]} target "
            f"positions by at most {yours:.2g}, where a right layer's differ by up to "
            f"{right:.2g}: what the decoder has read so far (x) barely reaches your output.")


check_decoder_layer = Check(
    "check_decoder_layer",
    "fn(layer, x (B, T, d), memory (B, S, d), self_mask=None, "
    "memory_mask=None) -> (B, T, d): a post-LN decoder layer's forward pass, with the "
    "sub-modules of a course_lib DecoderLayer",
    cause_label="Measured",  # a debugging exercise: the check reports a measurement, not the bug
    params=("layer", "x", "memory"),
    call=no_grad,
    diagnose=_position_spread,
    mistakes=[
        Mistake("cross-attention takes its keys and values from the decoder itself: pass "
                "`memory` as key and value (layer.multihead_attn(x, memory, memory, ...))."),
        Mistake("with the memory one vector at every source position, your output is the same "
                "at every target position: x reaches it only as the attentions' queries, and "
                "nothing of x is added back after a sub-layer (no residual path)."),
        Mistake("the rows of your output, taken back through norm3's gain and bias, do not have "
                "mean 0 and standard deviation 1, as they would if norm3 came last: the layer "
                "looks pre-LN."),
        Mistake("the masks are ignored: pass self_mask to self-attention and memory_mask to "
                "cross-attention."),
        Mistake("the sub-layers are in the wrong order: masked self-attention first, then "
                "cross-attention, then the feed-forward network."),
    ],
    hints=["Measure before reading: how much does your output change when x changes, and when "
           "memory changes (the gradient of sum(out @ u), or a small change of each)? Compare "
           "with layer(x, memory), called outside your function.",
           "Repeat the measurement after each of the three sub-layers (stop your function "
           "there): after which one does x stop reaching the output?"],
    forbidden=(Forbidden("course_lib.transformer.DecoderLayer"),
               Forbidden("course_lib.transformer.Decoder"),
               Forbidden("torch.nn.TransformerDecoderLayer")),
)


# --------------------------------------------------------------------------------------
# greedy decoding
# --------------------------------------------------------------------------------------
def _until_eos(row, eos_id=2):
    return row[:row.index(eos_id) + 1] if eos_id in row else row


def _compare_until_eos(got, expected):
    """Rows compared up to their first <eos> (= 2 in the cases): what follows does not matter."""
    if not isinstance(got, torch.Tensor) or got.dim() != 2 or got.shape[0] != expected.shape[0]:
        return compare(got, expected, "tokens")
    for b, (g_row, e_row) in enumerate(zip(got.tolist(), expected.tolist())):
        if _until_eos(g_row) != _until_eos(e_row):
            return f"row {b}: expected {_until_eos(e_row)} (up to <eos> = 2), got {_until_eos(g_row)}."
    return None


check_greedy_decode = Check(
    "check_greedy_decode",
    "fn(model, src (B, S), max_len, bos_id, eos_id) -> (B, L) ids without "
    "<bos>, compared up to each row's first <eos>",
    params=("model", "src", "max_len", "bos_id", "eos_id"),
    call=no_grad,
    compare=_compare_until_eos,
    mistakes=[
        Mistake("the result still starts with <bos>: return ys[:, 1:]."),
        Mistake("the next token came from the FIRST position's logits; the prediction for the "
                "next token is at the last position, logits[:, -1]."),
        Mistake("more than max_len tokens were generated: write at most max_len tokens."),
    ],
    hints=["Encode the source once; the decoder then reads the tokens written so far, starting "
           "from a (B, 1) column of bos_id.",
           "At each step, the logits of the next token are those of the last position: take "
           "their argmax and append it.",
           "Stop when every row has written eos_id or after max_len tokens; return the tokens "
           "without the <bos> column."],
    forbidden=(Forbidden("course_lib.transformer.greedy_decode"),
               Forbidden("course_lib.transformer.beam_search"),
               Forbidden("course_lib.decoding.greedy"), Forbidden("course_lib.decoding.decode")),
)


# --------------------------------------------------------------------------------------
# the inverse-square-root warm-up of Vaswani et al. (2017)
# --------------------------------------------------------------------------------------
check_inverse_sqrt_lr = Check(
    "check_inverse_sqrt_lr",
    "fn(step, d_model, warmup) -> float: the learning rate of "
    "Vaswani et al. (2017) at step `step` (counted from 1)",
    params=("step", "d_model", "warmup"),
    mistakes=[
        Mistake("the warm-up branch rises too fast and the two branches do not meet at "
                "step = warmup: the rising branch is step * warmup^-1.5."),
        Mistake("max instead of min: the rate must be the SMALLER of the rising and the "
                "decaying branch (the decay wins after the warm-up)."),
        Mistake("the factor d_model^-0.5 is missing: wider models get smaller rates."),
    ],
    hints=["The rate is a product: a factor that depends on the width only, times the smaller "
           "of two functions of the step.",
           "One branch decays like 1/sqrt(step); the other grows linearly in step and must "
           "equal the first at step = warmup. Solve for its slope."],
    forbidden=(Forbidden("course_lib.transformer_train.inverse_sqrt_warmup"),),
)


# --------------------------------------------------------------------------------------
# the decoder's self-attention mask: causal AND no padded keys
# --------------------------------------------------------------------------------------
check_decoder_self_mask = Check(
    "check_decoder_self_mask",
    "fn(tgt_in (B, T) ids, pad_id) -> (B, 1, T, T) bool, True = "
    "allowed: query t may attend key s if s <= t and key s is not padding",
    params=("tgt_in", "pad_id"),
    mistakes=[
        Mistake("only the padding is masked: a query also must not see the keys after it "
                "(the causal part)."),
        Mistake("only the causal part is there: padded keys must be masked too."),
        Mistake("the polarity is torch's (True = blocked); the course's masks say True = allowed."),
        Mistake("the rows of padded QUERIES are masked too: they then have no allowed key, and a "
                "softmax over nothing is 0/0 (NaN in nn.MultiheadAttention). Mask only the keys; "
                "no one reads the outputs at padded positions."),
        Mistake("the triangle is the wrong one: query t may see keys s <= t (lower triangle, "
                "diagonal included)."),
    ],
    hints=["Build the two conditions separately: one depends on (query, key) positions only, "
           "the other on the key's token only.",
           "Give the key condition the shape (B, 1, 1, T) and the position condition (T, T); "
           "broadcasting combines them into (B, 1, T, T) with a logical AND."],
    forbidden=(Forbidden("course_lib.attention.causal_mask"),
               Forbidden("course_lib.attention.padding_mask"),
               Forbidden("course_lib.attention.padding_mask_from_tokens")),
)


# --------------------------------------------------------------------------------------
# the label-smoothed loss
# --------------------------------------------------------------------------------------
check_label_smoothed_loss = Check(
    "check_label_smoothed_loss",
    "fn(logits (N, V), target (N,), eps, pad_id) -> scalar: the "
    "label-smoothed cross-entropy, mean over the non-pad targets, the same as torch's cross_entropy "
    "with ignore_index and label_smoothing (both off limits here)",
    params=("logits", "target", "eps", "pad_id"),
    mistakes=[
        Mistake("eps is spread over the V - 1 wrong classes only; torch (and Szegedy et al., "
                "2016) spread it over all V classes, the right one included."),
        Mistake("the loss is only scaled by (1 - eps): the smoothed target also puts eps / V on "
                "every class, which adds eps times the mean of -log p over the classes."),
        Mistake("the padded targets count in the mean: drop the positions whose target is pad_id."),
        Mistake("this is a sum; the loss is the MEAN over the non-pad targets."),
    ],
    hints=["The smoothed target is a distribution q: 1 - eps on the right class plus eps "
           "shared equally by all V classes. The loss is the cross-entropy -sum_v q_v log p_v.",
           "With log p = log_softmax(logits), the loss of one row splits into (1 - eps) times "
           "the usual -log p[target] plus eps times an average over the classes. Average the "
           "rows whose target is not pad_id."],
    forbidden=(Forbidden("torch.nn.functional.cross_entropy",
                         label="F.cross_entropy(..., label_smoothing=...)",
                         when=lambda args: args["label_smoothing"] > 0),
               Forbidden(label="torch's cross_entropy_loss operator (torch._C._nn, torch.ops.aten)",
                         aten="cross_entropy_loss", outside_torch=True),
               Forbidden("course_lib.transformer_train.transformer_loss")),
)


check_smoothing_floor_prediction = Prediction(
    "check_smoothing_floor_prediction", "your prediction of the lowest label-smoothed loss "
    "(eps = 0.1, V = 15) any logits can reach, against the measurement",
    quantity="the lowest label-smoothed cross-entropy (eps = 0.1, 15 classes), in nats",
    tolerance=within(rel=0.2), example=0.5555,
    explanation=("the cross-entropy -sum_v q_v log p_v is smallest when p = q, and then it equals "
                 "the entropy of q: with q = 0.9067 on the right class and 0.0067 on each of "
                 "the 14 others, H(q) = 0.56 nats. A model trained with label smoothing never "
                 "reaches zero loss, and its training loss is not comparable with an unsmoothed "
                 "one: compare held-out metrics (exact match, perplexity) instead."),
    mistakes=[
        Mistake("a perfect model does not reach zero: the smoothed target is not one-hot, so the "
                "best prediction is the target itself, whose entropy is not zero.",
                lambda measured: 0.0),
        Mistake("the floor is not eps itself: it is the entropy of the smoothed target, where "
                "the 14 small probabilities each cost -log(0.0067) = 5 nats.",
                lambda measured: 0.1),
        Mistake("the floor is far below the chance level ln 15: the model can still put most of "
                "its probability on the right class.", lambda measured: 2.708),
    ],
    hints=["Which distribution p minimises the cross-entropy between the target q and p?",
           "Write q out for eps = 0.1 and V = 15 (the right class also receives eps / V), and "
           "compute its entropy."],
)


check_beam_change_prediction = Prediction(
    "check_beam_change_prediction", "your prediction of the share of 100 held-out dates whose "
    "output beam search (k = 4) changes, on chapter 9's trained date model, against the measurement",
    quantity="the share of 100 held-out dates on which beam search (k = 4) writes another output "
    "than greedy decoding", tolerance=within(abs=0.03), example=0.0,
    explanation=("the trained date model puts a probability near 1 on almost every token it writes "
                 "(the example followed end to end prints them). A sequence whose probability is "
                 "above 1/2 is the most probable one, since all the others share less than 1/2, and "
                 "each of its prefixes is the most probable of its length: it stays first in the "
                 "beam and beam search returns it. Beam search changes outputs where a model "
                 "hesitates between prefixes, as in translation (chapter 3 measures it on a model "
                 "that hesitates)."),
    mistakes=[
        Mistake("beam search is not a better model: it only looks for a more probable sequence "
                "under the same model, and a model this sure of every token leaves none to find.",
                lambda measured: 0.2),
        Mistake("beam search does not always return something new: greedy's sequence is among "
                "its candidates, and it is returned whenever it is the most probable.",
                lambda measured: 1.0),
    ],
    hints=["How probable is each token the greedy decoder writes? Could a second-best first "
           "token lead to a sequence more probable than greedy's?",
           "A sequence's probability is the product of its tokens' probabilities; greedy's product "
           "here is close to 1."],
)
