"""Checks for chapter 3, "Sequence to sequence"."""

from __future__ import annotations

from ._compare import within
from ._engine import Check, Mistake, Prediction
from ._forbid import Forbidden

# --------------------------------------------------------------------------------------
# The teacher-forced loss, padding ignored
# --------------------------------------------------------------------------------------
check_sequence_loss = Check(
    "check_sequence_loss",
    "fn(logits (B, T, V), tgt_out (B, T), pad_id) -> scalar: the mean "
    "cross-entropy over the non-pad target positions",
    params=("logits", "tgt_out", "pad_id"),
    mistakes=[
        Mistake("the padding positions are counted: they are not part of any target, so they "
                "must not be scored."),
        Mistake("the sum and the count do not match: the sum runs over every position but the "
                "count over the real ones; average over the non-pad positions only."),
        Mistake("this is the sum over the positions; take the mean over the non-pad positions."),
        Mistake("the padding is left out of the sum but counted in the denominator: divide by the "
                "number of real positions, not by B * T."),
        Mistake("this is the mean of the per-sequence means: a short target then weighs as much as "
                "a long one; average over all real positions of the batch at once."),
        Mistake("the pad id is hard-coded as 0: compare the targets with `pad_id`, which the last "
                "case sets to 6 (there, 0 is a real token)."),
    ],
    hints=["Score every position with the cross-entropy, then average only over the positions "
           "whose target is a real token.",
           "Flatten logits to (B*T, V) and targets to (B*T,) first; F.cross_entropy(..., "
           "reduction='none') gives one loss per position (ignore_index would do the masking "
           "for you: that part is the exercise).",
           "Build a (B*T,) bool mask of the real positions; the mean is the masked sum divided "
           "by the number of real positions."],
    forbidden=(Forbidden("torch.nn.functional.cross_entropy",
                         label="F.cross_entropy(..., ignore_index=...)",
                         when=lambda args: args["ignore_index"] != -100),
               # every other loss that ignores an index (F.nll_loss, pads remapped to -100,
               # torch._C._nn, torch.ops.aten), refused where it reaches the operator: when a
               # target equals the index it ignores
               Forbidden(label="a torch loss that ignores an index",
                         aten=("nll_loss_forward", "nll_loss2d_forward"),
                         when=lambda a: bool((a[1] == a[4]).any())),
               Forbidden("course_lib.seq2seq.seq2seq_loss")),
)


# --------------------------------------------------------------------------------------
# Greedy decoding
# --------------------------------------------------------------------------------------
class _TableStep:
    """A deterministic toy decoder: step(y (B,), state) -> (logits (B, V), state + 1); the
    logits depend on the previous token and the step. The state is a (B,) step counter, or a
    (B, H) float tensor (like a GRU's hidden state) whose first column counts the steps."""

    def __init__(self, table):
        self.table = table  # (T, V, V): logits of the next token at step t after token v

    def __call__(self, y, state):
        t = (state if state.dim() == 1 else state[:, 0]).long().clamp(max=self.table.shape[0] - 1)
        return self.table[t, y], state + 1

    def __repr__(self):
        return f"a toy step function over {self.table.shape[-1]} tokens"


check_greedy_search = Check(
    "check_greedy_search",
    "fn(step, state, bos_id, eos_id, max_len) -> tokens (B, L) long: "
    "greedy decoding with step(y (B,), state) -> (logits (B, V), state); len(state) is B",
    params=("step", "state", "bos_id", "eos_id", "max_len"),
    mistakes=[
        Mistake("the output starts with bos: return only the tokens the decoder wrote."),
        Mistake("decoding went on after every row had written eos: stop as soon as all are done."),
        Mistake("after a row writes eos it must keep writing eos (it is finished)."),
        Mistake("the decoder was fed bos at every step: feed back the token you just chose, and "
                "pass on the state that step returned."),
    ],
    hints=["Start every row from bos_id; each call of step gives the logits of the next token "
           "and the state to pass to the next call.",
           "Choose the most likely token, feed it back, and remember which rows have written "
           "eos_id: a finished row keeps writing eos_id.",
           "Stop after max_len tokens or as soon as every row is finished; stack the chosen "
           "tokens along dim=1 (without bos)."],
    forbidden=(Forbidden("course_lib.decoding.greedy"), Forbidden("course_lib.decoding.decode"),
               Forbidden("course_lib.decoding.beam_search")),
)


# --------------------------------------------------------------------------------------
# Picking the best finished beam with GNMT's length penalty
# --------------------------------------------------------------------------------------
check_best_beam = Check(
    "check_best_beam",
    "fn(log_prob (N, K), lengths (N, K), alpha) -> (N,) long: the index of "
    "the best finished beam by log p(y) / lp(y), lp(y) = ((5 + |y|) / 6) ** alpha (Wu et al. 2016)",
    params=("log_prob", "lengths", "alpha"),
    mistakes=[
        Mistake("the beams were ranked by log p alone: divide by the length penalty first."),
        Mistake("this is the plain |y| ** alpha normalisation; GNMT's penalty is "
                "((5 + |y|) / 6) ** alpha, gentler for short outputs."),
        Mistake("log-probabilities are negative: the best beam has the LARGEST normalised "
                "score (closest to 0), not the smallest."),
        Mistake("the log-probability was multiplied by the penalty: normalising divides by it."),
    ],
    hints=["Compute the penalty lp(|y|) of every beam from its length, elementwise, as a float.",
           "Normalise each beam's summed log-probability by its penalty; then pick, per source, "
           "the beam whose normalised score is best (think about the sign of a log-probability)."],
    no_shortcut=("course_lib and torch have no GNMT length penalty (course_lib's beam search "
                 "divides by |y| ** alpha)"),
)


# --------------------------------------------------------------------------------------
# Predict, then measure: how often greedy decoding misses the most likely output
# --------------------------------------------------------------------------------------
check_search_error_prediction = Prediction(
    "check_search_error_prediction", "your prediction of the fraction of inputs for which a "
    "beam of 4 finds a more likely output than greedy decoding (a random toy model, 6 tokens, "
    "6 steps), against the measurement",
    quantity="the fraction of the 1000 toy inputs on which beam search beats greedy in log p(y)",
    tolerance=within(abs=0.15), example=0.45,
    explanation=("greedy decoding maximises each factor p(y_t | y_<t) in turn, not the product. "
                 "Whenever a slightly less likely token leads to much more confident "
                 "continuations, greedy misses the most likely output; in a model whose "
                 "next-token distributions are not sharp this happens for a large share of the "
                 "inputs, and a beam of 4 often finds the more likely output. It is not an "
                 "exhaustive search: when four other prefixes score higher after some step, it "
                 "drops the prefix greedy decoding follows, and on a few inputs it ends with a "
                 "LESS likely output than greedy's. Whether the more likely output is also the "
                 "right one depends on the model, not on the search."),
    mistakes=[
        Mistake("greedy is optimal step by step, not over the whole output: the product of the "
                "probabilities can favour a second-best first token.", lambda m: 0.0),
        Mistake("greedy often does find the most likely output (whenever the best token at each "
                "step also leads to the best continuation), so beam search cannot win on every "
                "input.", lambda m: 1.0),
    ],
    hints=["Think of the constructed example of the chapter: when does a second-best first token "
           "lead to a more likely output?",
           "How sharp are the toy model's next-token distributions (the factor 2 on standard "
           "normal logits over 6 tokens)? Sharp distributions leave little to find."],
)


# --------------------------------------------------------------------------------------
# One step of beam search
# --------------------------------------------------------------------------------------
check_beam_step = Check(
    "check_beam_step",
    "fn(scores (B, K), logp (B, K, V), beam_size) -> (scores, beam, token), "
    "each (B, beam_size): the best continuations of all beams together",
    params=("scores", "logp", "beam_size"),
    outputs=("scores", "beam", "token"),
    mistakes=[
        Mistake("each beam kept only its own best token: compare all K*V candidates together, "
                "so a strong beam may keep two children and a weak one none."),
        Mistake("beam and token are swapped: return (scores, beam, token)."),
        Mistake("flat index i over K beams x V tokens belongs to beam i // V and token i % V "
                "(divide by V, the number of tokens, not by K)."),
        Mistake("the beams' scores so far are missing: add scores[..., None] to logp."),
    ],
    hints=["A continuation's score is its beam's score plus the log-probability of the new "
           "token: build all K x V of them at once by broadcasting.",
           "Rank all K*V candidates of a source together (flatten the last two dims) and keep "
           "the beam_size best.",
           "Recover the beam and the token from each flat index with integer division and "
           "remainder."],
    forbidden=(Forbidden("course_lib.decoding.beam_step"),),
)
