"""Checks for chapter 3, "Sequence to sequence"."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._compare import within
from ._engine import Case, Check, Mistake, Prediction, lib, randn


# --------------------------------------------------------------------------------------
# The teacher-forced loss, padding ignored
# --------------------------------------------------------------------------------------
def _per_token(logits, tgt_out):
    return F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), reduction="none")


def _loss_cases(g):
    padded = torch.randint(1, 7, (3, 5), generator=g)
    padded[0, 3:] = 0
    padded[2, 1:] = 0
    other_pad = torch.randint(0, 6, (2, 6), generator=g)
    other_pad[1, 2:] = 6
    return [
        Case("three targets of different lengths, right-padded with 0",
             randn(g, 3, 5, 7, scale=2.0), padded, 0),
        Case("no padding at all", randn(g, 2, 4, 7), torch.randint(1, 7, (2, 4), generator=g), 0),
        Case("the pad id is 6, and 0 is a real token", randn(g, 2, 6, 7), other_pad, 6),
    ]


check_sequence_loss = Check(
    "check_sequence_loss", "fn(logits (B, T, V), tgt_out (B, T), pad_id) -> scalar: the mean "
    "cross-entropy over the non-pad target positions",
    params=("logits", "tgt_out", "pad_id"),
    reference=lambda logits, tgt, pad: F.cross_entropy(logits.flatten(0, 1), tgt.flatten(),
                                                       ignore_index=pad),
    cases=_loss_cases, seed=10,
    mistakes=[
        Mistake("the padding positions are counted: they are not part of any target, so they "
                "must not be scored.", lambda lg, t, pad: _per_token(lg, t).mean()),
        Mistake("the sum and the count do not match: the sum runs over every position but the "
                "count over the real ones; average over the non-pad positions only.",
                lambda lg, t, pad: _per_token(lg, t).sum() / (t != pad).sum()),
        Mistake("this is the sum over the positions; take the mean over the non-pad positions.",
                lambda lg, t, pad: (_per_token(lg, t) * (t != pad).flatten()).sum()),
    ],
    hints=["Score every position with the cross-entropy, then average only over the positions "
           "whose target is a real token.",
           "Flatten logits to (B*T, V) and targets to (B*T,) first; F.cross_entropy has an "
           "argument for a target id to ignore."],
)


# --------------------------------------------------------------------------------------
# Greedy decoding
# --------------------------------------------------------------------------------------
class _TableStep:
    """A deterministic toy decoder: step(y (B,), state (B,) step counter) -> (logits (B, V),
    state + 1); the logits depend on the previous token and the step."""

    def __init__(self, table):
        self.table = table  # (T, V, V): logits of the next token at step t after token v

    def __call__(self, y, state):
        t = state.clamp(max=self.table.shape[0] - 1)
        return self.table[t, y], state + 1

    def __repr__(self):
        return f"a toy step function over {self.table.shape[-1]} tokens"


def _greedy(step, state, bos_id, eos_id, max_len, keep_bos=False, stop=True, sticky=True,
            feed_back=True):
    """Greedy decoding; the keyword switches are the typical mistakes."""
    y = torch.full_like(state, bos_id)
    done = torch.zeros_like(y, dtype=torch.bool)
    out = [y] if keep_bos else []
    for _ in range(max_len):
        logits, state = step(y if feed_back else torch.full_like(y, bos_id), state)
        y = logits.argmax(-1)
        if sticky:
            y = torch.where(done, torch.full_like(y, eos_id), y)
        done |= y == eos_id
        out.append(y)
        if stop and bool(done.all()):
            break
    return torch.stack(out, 1)


def _greedy_cases(g):
    V = 6
    table = torch.randn(8, V, V, generator=g)
    table[:, :, 2] -= 1.0  # eos (id 2) is unlikely ...
    table[:, 3, 2] += 8.0  # ... except right after token 3
    table[:, 2, :] = torch.tensor([0.0, 0.0, -9.0, 5.0, 0.0, 0.0])  # after eos the model says 3
    ends_early = torch.randn(8, V, V, generator=g)
    ends_early[2, :, 2] += 10.0  # everyone ends at step 2
    never = torch.randn(8, V, V, generator=g)
    never[:, :, 2] = -10.0  # eos never wins: stop at max_len
    return [
        Case("a batch of 4 rows that end at different steps", _TableStep(table), torch.arange(4),
             1, 2, 8),
        Case("every row writes eos at step 2 (stop early)", _TableStep(ends_early),
             torch.zeros(3, dtype=torch.long), 1, 2, 8),
        Case("eos never comes: stop after max_len = 5 tokens", _TableStep(never),
             torch.zeros(2, dtype=torch.long), 1, 2, 5),
    ]


check_greedy_search = Check(
    "check_greedy_search", "fn(step, state, bos_id, eos_id, max_len) -> tokens (B, L) long: "
    "greedy decoding with step(y (B,), state) -> (logits (B, V), state)",
    params=("step", "state", "bos_id", "eos_id", "max_len"),
    reference=_greedy, cases=_greedy_cases, seed=11,
    mistakes=[
        Mistake("the output starts with bos: return only the tokens the decoder wrote.",
                lambda *a: _greedy(*a, keep_bos=True)),
        Mistake("decoding went on after every row had written eos: stop as soon as all are done.",
                lambda *a: _greedy(*a, stop=False)),
        Mistake("after a row writes eos it must keep writing eos (it is finished).",
                lambda *a: _greedy(*a, sticky=False)),
        Mistake("the decoder was fed bos at every step: feed back the token you just chose, and "
                "pass on the state that step returned.", lambda *a: _greedy(*a, feed_back=False)),
    ],
    hints=["Start every row from bos_id; each call of step gives the logits of the next token "
           "and the state to pass to the next call.",
           "Choose the most likely token, feed it back, and remember which rows have written "
           "eos_id: a finished row keeps writing eos_id.",
           "Stop after max_len tokens or as soon as every row is finished; stack the chosen "
           "tokens along dim=1 (without bos)."],
)


# --------------------------------------------------------------------------------------
# Picking the best finished beam with GNMT's length penalty
# --------------------------------------------------------------------------------------
def _gnmt(log_prob, lengths, alpha, form="gnmt", pick="max"):
    """Index (N,) of the best of K finished beams by log p / lp(|y|); `form` and `pick` are the
    typical mistakes."""
    n = lengths.to(log_prob.dtype)
    if form == "gnmt":
        penalty = ((5 + n) / 6) ** alpha
    elif form == "plain":
        penalty = n ** alpha
    else:  # "none"
        penalty = torch.ones_like(n)
    ranked = log_prob * penalty if pick == "times" else log_prob / penalty
    return ranked.argmin(-1) if pick == "min" else ranked.argmax(-1)


def _gnmt_cases(g):
    short_vs_long = torch.tensor([[-4.0, -5.0, -9.0]]), torch.tensor([[3, 8, 20]])
    rand_lp = -torch.rand(4, 5, generator=g) * 12 - 0.5
    rand_len = torch.randint(1, 30, (4, 5), generator=g)
    return [
        Case("4 sources x 5 beams, alpha = 0.6", rand_lp, rand_len, 0.6),
        Case("a short, a medium and a long output, alpha = 1", *short_vs_long, 1.0),
        Case("alpha = 0: plain log-probability", rand_lp, rand_len, 0.0),
        Case("a long output that the plain |y| form would favour, alpha = 1",
             torch.tensor([[-2.0, -3.5]]), torch.tensor([[2, 5]]), 1.0),
    ]


check_best_beam = Check(
    "check_best_beam", "fn(log_prob (N, K), lengths (N, K), alpha) -> (N,) long: the index of "
    "the best finished beam by log p(y) / lp(y), lp(y) = ((5 + |y|) / 6) ** alpha (Wu et al. 2016)",
    params=("log_prob", "lengths", "alpha"),
    reference=_gnmt, cases=_gnmt_cases, seed=12,
    mistakes=[
        Mistake("the beams were ranked by log p alone: divide by the length penalty first.",
                lambda lp, n, a: _gnmt(lp, n, a, form="none")),
        Mistake("this is the plain |y| ** alpha normalisation; GNMT's penalty is "
                "((5 + |y|) / 6) ** alpha, gentler for short outputs.",
                lambda lp, n, a: _gnmt(lp, n, a, form="plain")),
        Mistake("log-probabilities are negative: the best beam has the LARGEST normalised "
                "score (closest to 0), not the smallest.", lambda lp, n, a: _gnmt(lp, n, a, pick="min")),
        Mistake("the log-probability was multiplied by the penalty: normalising divides by it.",
                lambda lp, n, a: _gnmt(lp, n, a, pick="times")),
    ],
    hints=["Compute the penalty lp(|y|) of every beam from its length, elementwise, as a float.",
           "Normalise each beam's summed log-probability by its penalty; then pick, per source, "
           "the beam whose normalised score is best (think about the sign of a log-probability)."],
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
                 "inputs. A beam of 4 finds a more likely output there (and never a less likely "
                 "one here, since every output has the same length). Whether the more likely "
                 "output is also the right one depends on the model, not on the search."),
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
def _beam(scores, logp, K, divide_by=None, add_scores=True, per_beam=False):
    """One beam-search step; the keywords are the typical mistakes."""
    B, _, V = logp.shape
    if per_beam:  # each beam keeps only its own best token
        best, token = logp.max(-1)
        top, beam = (best + scores).sort(-1, descending=True)
        return top[:, :K], beam[:, :K], token.gather(1, beam[:, :K])
    total = (scores[..., None] if add_scores else 0) + logp  # (B, K_old, V)
    top, flat = total.reshape(B, -1).topk(K, -1)
    d = V if divide_by is None else divide_by
    return top, flat // d, flat % d


def _beam_cases(g):
    def logp(*shape):
        return torch.log_softmax(torch.randn(*shape, generator=g) * 2, -1)

    first = torch.tensor([[0.0, -math.inf, -math.inf]])  # one live beam at the start
    strong_weak = torch.log_softmax(torch.tensor([[[2.0, 1.5, -3.0], [4.0, -2.0, -2.0]]]), -1)
    return [
        Case("2 sources, 3 beams, 5 tokens", torch.randn(2, 3, generator=g) - 3, logp(2, 3, 5), 3),
        Case("the first step: only beam 0 is alive", first, logp(1, 3, 6), 3),
        Case("a weak beam's best token loses to a strong beam's second best",
             torch.tensor([[-0.1, -5.0]]), strong_weak, 2),
        Case("keep 4 of 2 beams x 7 tokens", torch.randn(3, 2, generator=g), logp(3, 2, 7), 4),
    ]


check_beam_step = Check(
    "check_beam_step", "fn(scores (B, K), logp (B, K, V), beam_size) -> (scores, beam, token), "
    "each (B, beam_size): the best continuations of all beams together",
    params=("scores", "logp", "beam_size"),
    reference=lib("decoding.beam_step", "seq2seq.beam_step"),
    cases=_beam_cases, seed=12, outputs=("scores", "beam", "token"),
    mistakes=[
        Mistake("each beam kept only its own best token: compare all K*V candidates together, "
                "so a strong beam may keep two children and a weak one none.",
                lambda s, lp, K: _beam(s, lp, K, per_beam=True)),
        Mistake("beam and token are swapped: return (scores, beam, token).",
                lambda s, lp, K: tuple(_beam(s, lp, K)[i] for i in (0, 2, 1))),
        Mistake("flat index i over K beams x V tokens belongs to beam i // V and token i % V "
                "(divide by V, the number of tokens, not by K).",
                lambda s, lp, K: _beam(s, lp, K, divide_by=lp.shape[1])),
        Mistake("the beams' scores so far are missing: add scores[..., None] to logp.",
                lambda s, lp, K: _beam(s, lp, K, add_scores=False)),
    ],
    hints=["A continuation's score is its beam's score plus the log-probability of the new "
           "token: build all K x V of them at once by broadcasting.",
           "Rank all K*V candidates of a source together (flatten the last two dims) and keep "
           "the beam_size best.",
           "Recover the beam and the token from each flat index with integer division and "
           "remainder."],
)
