"""Checks for the chapters "Sequence to sequence" and "Attention in seq2seq"."""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch
import torch.nn.functional as F

from ._engine import Case, CheckResult, _compare, _randn, _run_cases, _same, _type_name


def _ref():
    from course_lib import seq2seq  # imported lazily: the checks only need it when run

    return seq2seq


def _attention():
    from course_lib import attention

    return attention


def _compare_named(names):
    """Compare tuples element by element, naming each element in the message."""
    def compare(got: Any, expected: tuple) -> Optional[str]:
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return f"expected a tuple ({', '.join(names)}), got {_type_name(got)}."
        for g, e, name in zip(got, expected, names):
            problem = _compare(g, e, name)
            if problem:
                return problem
        return None
    return compare


# ======================================================================================
# Chapter "Sequence to sequence"
# ======================================================================================

# --------------------------------------------------------------------------------------
# The teacher-forced loss, padding ignored
# --------------------------------------------------------------------------------------
_LOSS_HINT = ("flatten logits to (B*T, V) and targets to (B*T,), take the cross-entropy of "
              "every position, and average over the positions whose target is not pad_id "
              "(F.cross_entropy(..., ignore_index=pad_id) does exactly this).")


def _reference_loss(logits, tgt_out, pad_id):
    return F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=pad_id)


def _loss_cases() -> list[Case]:
    g = torch.Generator().manual_seed(10)
    names = ("logits", "tgt_out", "pad_id")
    padded = torch.randint(1, 7, (3, 5), generator=g)
    padded[0, 3:] = 0
    padded[2, 1:] = 0
    no_pad = torch.randint(1, 7, (2, 4), generator=g)
    other_pad = torch.randint(0, 6, (2, 6), generator=g)
    other_pad[1, 2:] = 6
    return [
        Case("three targets of different lengths, right-padded with 0",
             (_randn(g, 3, 5, 7, scale=2.0), padded, 0), names=names),
        Case("no padding at all", (_randn(g, 2, 4, 7), no_pad, 0), names=names),
        Case("the pad id is 6, and 0 is a real token", (_randn(g, 2, 6, 7), other_pad, 6), names=names),
    ]


def check_sequence_loss(fn: Callable) -> CheckResult:
    """Check ``fn(logits (B, T, V), tgt_out (B, T), pad_id) -> scalar``: mean cross-entropy
    over the non-pad target positions."""
    return _run_cases("check_sequence_loss", fn, _reference_loss, _loss_cases(), _LOSS_HINT,
                      compare=_compare_scalar, diagnose=_diagnose_loss)


def _compare_scalar(got: Any, expected: torch.Tensor) -> Optional[str]:
    if isinstance(got, torch.Tensor) and got.numel() == 1 and got.shape != expected.shape:
        got = got.reshape(expected.shape)
    if isinstance(got, torch.Tensor) and got.dim() > 0 and got.numel() > 1:
        return (f"loss: expected a scalar (a 0-dim tensor), got shape {tuple(got.shape)}: "
                "average over the positions.")
    return _compare(got, expected, "loss")


def _diagnose_loss(case: Case, got: Any, expected: torch.Tensor) -> Optional[str]:
    logits, tgt_out, pad_id = case.args
    if not isinstance(got, torch.Tensor) or got.numel() != 1:
        return None
    per_token = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), reduction="none")
    if _same(got.reshape(()), per_token.mean()):
        return ("the padding positions are counted: they are not part of any target, so they "
                "must not be scored (ignore_index=pad_id).")
    real = tgt_out != pad_id
    if _same(got.reshape(()), per_token.sum() / real.sum()) or _same(got.reshape(()), (per_token * real.flatten()).sum() / tgt_out.numel()):
        return "the sum and the count do not match: average over the non-pad positions only."
    if _same(got.reshape(()), (per_token * real.flatten()).sum()):
        return "this is the sum over the positions; take the mean over the non-pad positions."
    return None


# --------------------------------------------------------------------------------------
# Greedy decoding
# --------------------------------------------------------------------------------------
_GREEDY_HINT = ("start from y = bos_id for every row; at each step call step(y, state), take "
                "y = logits.argmax(-1), append it; once a row has written eos_id it keeps "
                "writing eos_id; stop after max_len tokens or when every row is done. Return "
                "a (B, number of steps) long tensor.")


class _TableStep:
    """A deterministic toy decoder: logits depend on the previous token and the step.

    step(y (B,), state) -> logits (B, V), state; the state is a (B,) step counter.
    """

    def __init__(self, table):
        self.table = table  # (T, V, V): logits of the next token at step t after token v

    def __call__(self, y, state):
        t = state.clamp(max=self.table.shape[0] - 1)
        return self.table[t, y], state + 1


def _reference_greedy(step, state, bos_id, eos_id, max_len):
    y = torch.full_like(state, bos_id)
    done = torch.zeros_like(y, dtype=torch.bool)
    out = []
    for _ in range(max_len):
        logits, state = step(y, state)
        y = torch.where(done, torch.full_like(y, eos_id), logits.argmax(-1))
        done |= y == eos_id
        out.append(y)
        if bool(done.all()):
            break
    return torch.stack(out, 1)


def _greedy_cases() -> list[Case]:
    g = torch.Generator().manual_seed(11)
    names = ("step", "state", "bos_id", "eos_id", "max_len")
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
        Case("a batch of 4 rows that end at different steps",
             (_TableStep(table), torch.arange(4), 1, 2, 8), names=names),
        Case("every row writes eos at step 2 (stop early)",
             (_TableStep(ends_early), torch.zeros(3, dtype=torch.long), 1, 2, 8), names=names),
        Case("eos never comes: stop after max_len = 5 tokens",
             (_TableStep(never), torch.zeros(2, dtype=torch.long), 1, 2, 5), names=names),
    ]


def check_greedy_search(fn: Callable) -> CheckResult:
    """Check ``fn(step, state, bos_id, eos_id, max_len) -> tokens (B, T)``, greedy decoding."""
    return _run_cases("check_greedy_search", fn, _reference_greedy, _greedy_cases(), _GREEDY_HINT,
                      compare=_compare_tokens, diagnose=_diagnose_greedy)


def _compare_tokens(got: Any, expected: torch.Tensor) -> Optional[str]:
    if not isinstance(got, torch.Tensor):
        return f"tokens: expected a torch.Tensor, got {_type_name(got)}."
    if got.shape != expected.shape:
        return f"tokens: expected shape {tuple(expected.shape)}, got shape {tuple(got.shape)}."
    if not torch.equal(got.long(), expected):
        row = int((got.long() != expected).any(-1).nonzero()[0])
        return f"tokens differ; row {row}: expected {expected[row].tolist()}, got {got[row].tolist()}."
    return None


def _diagnose_greedy(case: Case, got: Any, expected: torch.Tensor) -> Optional[str]:
    if not isinstance(got, torch.Tensor):
        return None
    step, state, bos_id, eos_id, max_len = case.args
    if got.dim() == 2 and got.shape[1] == expected.shape[1] + 1 and torch.equal(got[:, 1:].long(), expected):
        return "the output starts with bos: return only the tokens the decoder wrote."
    if got.dim() == 2 and got.shape[0] == expected.shape[0] and got.shape[1] > expected.shape[1]:
        return "decoding went on after every row had written eos: stop as soon as all are done."
    if got.shape == expected.shape and not torch.equal(got.long(), expected):
        eos_after = (expected == eos_id).cumsum(1) > 1
        if torch.equal(got.long()[~eos_after], expected[~eos_after]):
            return "after a row writes eos it must keep writing eos (it is finished)."
        return ("the tokens differ before eos: feed back the token you just chose "
                "(y = logits.argmax(-1)) and pass the state returned by step to the next call.")
    return None


# --------------------------------------------------------------------------------------
# One step of beam search
# --------------------------------------------------------------------------------------
_BEAM_HINT = ("add each beam's score to the log-probabilities of its next tokens "
              "(scores[..., None] + logp: (B, K, V)), flatten the last two dims to K*V, take the "
              "top beam_size, and split each flat index i into beam = i // V and token = i % V.")


def _reference_beam_step(scores, logp, beam_size):
    return _ref().beam_step(scores, logp, beam_size)


def _beam_cases() -> list[Case]:
    g = torch.Generator().manual_seed(12)
    names = ("scores", "logp", "beam_size")

    def logp(*shape):
        return torch.log_softmax(torch.randn(*shape, generator=g) * 2, -1)

    first = torch.tensor([[0.0, float("-inf"), float("-inf")]])  # one live beam at the start
    return [
        Case("2 sources, 3 beams, 5 tokens", (torch.randn(2, 3, generator=g) - 3, logp(2, 3, 5), 3),
             names=names),
        Case("the first step: only beam 0 is alive", (first, logp(1, 3, 6), 3), names=names),
        Case("a weak beam's best token loses to a strong beam's second best",
             (torch.tensor([[-0.1, -5.0]]), torch.log_softmax(torch.tensor([[[2.0, 1.5, -3.0],
                                                                            [4.0, -2.0, -2.0]]]), -1), 2),
             names=names),
        Case("keep 4 of 2 beams x 7 tokens", (torch.randn(3, 2, generator=g), logp(3, 2, 7), 4),
             names=names),
    ]


def check_beam_step(fn: Callable) -> CheckResult:
    """Check ``fn(scores (B, K), logp (B, K, V), beam_size) -> (scores, beam, token)``."""
    return _run_cases("check_beam_step", fn, _reference_beam_step, _beam_cases(), _BEAM_HINT,
                      compare=_compare_beam, diagnose=_diagnose_beam)


def _compare_beam(got: Any, expected: tuple) -> Optional[str]:
    if not isinstance(got, (tuple, list)) or len(got) != 3:
        return f"expected a tuple (scores, beam, token), got {_type_name(got)}."
    problem = _compare(got[0], expected[0], "scores")
    if problem:
        return problem
    for g, e, name in zip(got[1:], expected[1:], ("beam", "token")):
        if not isinstance(g, torch.Tensor) or g.shape != e.shape or not torch.equal(g.long(), e):
            shown = g.tolist() if isinstance(g, torch.Tensor) else g
            return f"{name}: expected {e.tolist()}, got {shown}."
    return None


def _diagnose_beam(case: Case, got: Any, expected: tuple) -> Optional[str]:
    scores, logp, K = case.args
    if not isinstance(got, (tuple, list)) or len(got) != 3 or not isinstance(got[0], torch.Tensor):
        return None
    best_per_beam = logp.max(-1).values + scores  # (B, K): one candidate per beam
    if got[0].shape == best_per_beam.shape and _same(got[0], best_per_beam.sort(-1, descending=True).values):
        return ("each beam kept only its own best token: compare all K*V candidates together, "
                "so a strong beam may keep two children and a weak one none.")
    V = logp.shape[-1]
    if _same(got[0], expected[0]) and isinstance(got[1], torch.Tensor):
        if torch.equal(got[1].long(), expected[2]) and torch.equal(got[2].long(), expected[1]):
            return "beam and token are swapped: return (scores, beam, token)."
        if not torch.equal(got[1].long(), expected[1]):
            return f"with V = {V} tokens, flat index i belongs to beam i // V and token i % V."
    top_logp = (logp.reshape(logp.shape[0], -1)).topk(K, -1).values
    if _same(got[0], top_logp):
        return "the beams' scores so far are missing: add scores[..., None] to logp."
    return None


# ======================================================================================
# Chapter "Attention in seq2seq"
# ======================================================================================

# --------------------------------------------------------------------------------------
# The additive (Bahdanau, "concat") score
# --------------------------------------------------------------------------------------
_ADDITIVE_HINT = ("project both sides, W_q q (..., T_q, d_h) and W_k k (..., T_k, d_h), add them "
                  "for every pair with broadcasting (unsqueeze(-2) on the queries, unsqueeze(-3) "
                  "on the keys) to (..., T_q, T_k, d_h), apply tanh, then dot with v (d_h,).")


def _reference_additive(q, k, W_q, W_k, v):
    module = _attention().AdditiveScore(q.shape[-1], k.shape[-1], W_q.shape[0])
    with torch.no_grad():
        module.W_q.weight.copy_(W_q)
        module.W_k.weight.copy_(W_k)
        module.v.weight.copy_(v[None])
        return module(q, k)


def _additive_cases() -> list[Case]:
    g = torch.Generator().manual_seed(13)
    names = ("q", "k", "W_q", "W_k", "v")

    def case(desc, q_shape, k_shape, d_h):
        d_q, d_k = q_shape[-1], k_shape[-1]
        return Case(desc, (_randn(g, *q_shape), _randn(g, *k_shape), _randn(g, d_h, d_q),
                           _randn(g, d_h, d_k), _randn(g, d_h)), names=names)

    return [
        case("one query, four keys", (1, 3), (4, 3), 5),
        case("a batch, T_q != T_k, d_q != d_k", (2, 3, 4), (2, 6, 5), 8),
        case("a decoder state against the encoder states", (4, 1, 6), (4, 7, 6), 6),
    ]


def check_additive_score(fn: Callable) -> CheckResult:
    """Check ``fn(q, k, W_q, W_k, v) -> (..., T_q, T_k)`` = v^T tanh(W_q q_i + W_k k_j)."""
    return _run_cases("check_additive_score", fn, _reference_additive, _additive_cases(),
                      _ADDITIVE_HINT, diagnose=_diagnose_additive)


def _diagnose_additive(case: Case, got: Any, expected: torch.Tensor) -> Optional[str]:
    q, k, W_q, W_k, v = case.args
    if not isinstance(got, torch.Tensor):
        return None
    if got.shape == expected.transpose(-2, -1).shape != expected.shape:
        return "the result is (T_k, T_q): queries index the rows."
    no_tanh = ((q @ W_q.T).unsqueeze(-2) + (k @ W_k.T).unsqueeze(-3)) @ v
    if got.shape == expected.shape and _same(got, no_tanh):
        return "the tanh is missing: without it the score is linear, q and k never interact."
    swapped = torch.tanh((q @ W_q).unsqueeze(-2) + (k @ W_k).unsqueeze(-3)) @ v if (
        W_q.shape[0] == W_q.shape[1] and W_k.shape[0] == W_k.shape[1]) else None
    if swapped is not None and got.shape == expected.shape and _same(got, swapped):
        return "the weights are applied transposed: W_q q means q @ W_q.T for row vectors."
    return None


# --------------------------------------------------------------------------------------
# One Luong attention step
# --------------------------------------------------------------------------------------
_LUONG_HINT = ("scores = dot(s_t, h_j) for every source position (shape (B, S)); set padding "
               "positions (mask False) to -inf; a = softmax over S; c = sum_j a_j h_j (B, H); "
               "h~ = tanh([c; s_t] @ W_c.T), the context FIRST. Return (h_tilde, weights).")


def _reference_luong(s, enc, mask, W_c):
    A = _attention()
    scores = A.dot_score(s[:, None], enc)  # (B, 1, S)
    context, weights = A.attend(scores, enc, mask[:, None])  # (B, 1, H), (B, 1, S)
    h_tilde = torch.tanh(torch.cat([context[:, 0], s], -1) @ W_c.T)
    return h_tilde, weights[:, 0]


def _luong_cases() -> list[Case]:
    g = torch.Generator().manual_seed(14)
    names = ("s", "enc", "mask", "W_c")

    def case(desc, B, S, H, lengths):
        mask = torch.arange(S) < torch.tensor(lengths)[:, None]
        enc = _randn(g, B, S, H) * mask[..., None]
        return Case(desc, (_randn(g, B, H), enc, mask, _randn(g, H, 2 * H, scale=0.5)), names=names)

    return [
        case("no padding", 2, 5, 4, [5, 5]),
        case("right-padded sources", 3, 6, 4, [6, 2, 4]),
        case("a one-token source", 2, 3, 8, [1, 3]),
    ]


def check_luong_step(fn: Callable) -> CheckResult:
    """Check ``fn(s (B, H), enc (B, S, H), mask (B, S), W_c (H, 2H)) -> (h_tilde (B, H), weights (B, S))``."""
    return _run_cases("check_luong_step", fn, _reference_luong, _luong_cases(), _LUONG_HINT,
                      compare=_compare_named(("h_tilde", "weights")), diagnose=_diagnose_luong)


def _diagnose_luong(case: Case, got: Any, expected: tuple) -> Optional[str]:
    s, enc, mask, W_c = case.args
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return None
    h, w = got
    if _same(got, _reference_luong(s, enc, torch.ones_like(mask), W_c)) and not bool(mask.all()):
        return "padding positions got weight: mask them out (-inf) before the softmax."
    H = s.shape[-1]
    swapped = torch.cat([W_c[:, H:], W_c[:, :H]], -1)
    if _same(got, _reference_luong(s, enc, mask, swapped)):
        return "the concatenation is [s_t; c_t]; Luong's is [c_t; s_t], the context first."
    if isinstance(w, torch.Tensor) and _same(w, expected[1]):
        return "the weights are right but h_tilde is not: h~ = tanh(W_c [c; s]) with c = weights @ enc."
    return None


# --------------------------------------------------------------------------------------
# Local attention weights
# --------------------------------------------------------------------------------------
_LOCAL_HINT = ("positions j with |j - p_t| <= D that are real (mask True) take part in the "
               "softmax, the rest get weight 0; then multiply every weight by "
               "exp(-(j - p_t)^2 / (2 sigma^2)) with sigma = D / 2. Shapes: scores (B, T, S), "
               "p (B, T), the result (B, T, S).")


def _reference_local(scores, mask, p, window):
    return _ref().local_weights(scores, mask, p, window, gaussian=True)


def _local_cases() -> list[Case]:
    g = torch.Generator().manual_seed(15)
    names = ("scores", "mask", "p", "window")
    full = torch.ones(2, 8, dtype=torch.bool)
    padded = torch.arange(9) < torch.tensor([9, 5, 7])[:, None]
    return [
        Case("centres inside the source, D = 2", (_randn(g, 2, 3, 8), full,
                                                    torch.tensor([[1.0, 3.5, 6.2], [0.0, 4.0, 7.0]]), 2),
             names=names),
        Case("padded sources, D = 1", (_randn(g, 3, 2, 9), padded,
                                         torch.tensor([[2.0, 8.0], [4.4, 6.0], [0.3, 5.0]]), 1),
             names=names),
        Case("a wide window, D = 4", (_randn(g, 1, 4, 8), full[:1], torch.tensor([[0.0, 2.0, 5.0, 7.5]]), 4),
             names=names),
    ]


def check_local_weights(fn: Callable) -> CheckResult:
    """Check ``fn(scores, mask, p, window) -> (B, T, S)``, Luong's local-p weights."""
    return _run_cases("check_local_weights", fn, _reference_local, _local_cases(), _LOCAL_HINT,
                      diagnose=_diagnose_local)


def _diagnose_local(case: Case, got: Any, expected: torch.Tensor) -> Optional[str]:
    scores, mask, p, D = case.args
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        return None
    if _same(got, _ref().local_weights(scores, mask, p, D, gaussian=False)):
        return "the Gaussian factor exp(-(j - p_t)^2 / (2 sigma^2)), sigma = D/2, is missing."
    if _same(got, _ref().local_weights(scores, torch.ones_like(mask), p, D, gaussian=True)):
        return "padding positions inside the window got weight: combine the window with the mask."
    no_window = torch.softmax(scores.masked_fill(~mask[:, None], float("-inf")), -1)
    dist = torch.arange(scores.shape[-1]) - p[..., None]
    if _same(got, no_window * torch.exp(-dist**2 / (2 * (D / 2) ** 2))):
        return ("the softmax runs over the whole source: only positions with |j - p_t| <= D take "
                "part (the others get weight 0 before the Gaussian).")
    return None
