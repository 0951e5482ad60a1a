"""The seq2seq exercise checks pass on correct answers, and fail helpfully on the stub and on
typical mistakes."""

import pytest
import torch
import torch.nn.functional as F

from check_failures import fails_with
from course_lib.exercises import (
    CheckResult,
    ExerciseFailure,
    ExerciseNotAttempted,
    check_additive_score,
    check_beam_step,
    check_greedy_search,
    check_local_weights,
    check_luong_step,
    check_sequence_loss,
)


def stub(*args, **kwargs):
    raise NotImplementedError("Exercise: write your solution here")


# ---- correct answers, written the way a learner would ------------------------------------
def good_loss(logits, tgt_out, pad_id):
    per_token = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), reduction="none")
    real = (tgt_out != pad_id).reshape(-1).float()
    return (per_token * real).sum() / real.sum()


def good_greedy(step, state, bos_id, eos_id, max_len):
    y = torch.full((len(state),), bos_id, dtype=torch.long)  # len(state) is the batch size
    finished = torch.zeros(len(y), dtype=torch.bool)
    out = []
    for _ in range(max_len):
        logits, state = step(y, state)
        y = logits.argmax(-1)
        y[finished] = eos_id
        finished = finished | (y == eos_id)
        out.append(y)
        if finished.all():
            break
    return torch.stack(out, dim=1)


def good_beam_step(scores, logp, beam_size):
    B, K, V = logp.shape
    total = (scores.unsqueeze(-1) + logp).reshape(B, K * V)
    best, flat = total.topk(beam_size, dim=-1)
    return best, flat // V, flat % V


def good_additive(q, k, W_q, W_k, v):
    hidden = torch.tanh((q @ W_q.T).unsqueeze(-2) + (k @ W_k.T).unsqueeze(-3))
    return hidden @ v


def good_luong(s, enc, mask, W_c):
    scores = (enc @ s.unsqueeze(-1)).squeeze(-1)  # (B, S)
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    context = (weights.unsqueeze(-1) * enc).sum(1)
    return torch.tanh(torch.cat([context, s], -1) @ W_c.T), weights


def good_local(scores, mask, p, window):
    j = torch.arange(scores.shape[-1])
    dist = j - p.unsqueeze(-1)
    allowed = mask.unsqueeze(1) & (dist.abs() <= window)
    w = torch.softmax(scores.masked_fill(~allowed, float("-inf")), -1).nan_to_num(0.0)
    return w * torch.exp(-(dist**2) / (2 * (window / 2) ** 2))


# ---- typical mistakes ----------------------------------------------------------------
def loss_counting_pads(logits, tgt_out, pad_id):
    return F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten())


def per_token_losses(logits, tgt_out):
    return F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), reduction="none").view(tgt_out.shape)


def loss_over_all_positions(logits, tgt_out, pad_id):
    return (per_token_losses(logits, tgt_out) * (tgt_out != pad_id)).sum() / tgt_out.numel()


def loss_per_sequence(logits, tgt_out, pad_id):
    real = tgt_out != pad_id
    return ((per_token_losses(logits, tgt_out) * real).sum(1) / real.sum(1)).mean()


def loss_pad_zero(logits, tgt_out, pad_id):
    return good_loss(logits, tgt_out, 0)


def greedy_without_stopping_rows(step, state, bos_id, eos_id, max_len):
    y = torch.full((len(state),), bos_id, dtype=torch.long)  # len(state) is the batch size
    out = []
    for _ in range(max_len):
        logits, state = step(y, state)
        y = logits.argmax(-1)
        out.append(y)
        if (torch.stack(out, 1) == eos_id).any(1).all():
            break
    return torch.stack(out, 1)


def beam_step_per_beam(scores, logp, beam_size):
    best, token = logp.max(-1)
    total = scores + best
    order = total.argsort(-1, descending=True)[:, :beam_size]
    return total.gather(1, order), order, token.gather(1, order)


def beam_step_without_scores(scores, logp, beam_size):
    B, K, V = logp.shape
    best, flat = logp.reshape(B, K * V).topk(beam_size, dim=-1)
    return best, flat // V, flat % V


def additive_without_tanh(q, k, W_q, W_k, v):
    return ((q @ W_q.T).unsqueeze(-2) + (k @ W_k.T).unsqueeze(-3)) @ v


def luong_without_mask(s, enc, mask, W_c):
    return good_luong(s, enc, torch.ones_like(mask), W_c)


def luong_state_first(s, enc, mask, W_c):
    _, w = good_luong(s, enc, mask, W_c)
    context = (w.unsqueeze(-1) * enc).sum(1)
    return torch.tanh(torch.cat([s, context], -1) @ W_c.T), w


def local_without_gaussian(scores, mask, p, window):
    j = torch.arange(scores.shape[-1])
    allowed = mask.unsqueeze(1) & ((j - p.unsqueeze(-1)).abs() <= window)
    return torch.softmax(scores.masked_fill(~allowed, float("-inf")), -1).nan_to_num(0.0)


CHECKS = [
    (
        check_sequence_loss,
        good_loss,
        [
            (loss_counting_pads, "padding positions are counted"),
            (loss_over_all_positions, "counted in the denominator"),
            (loss_per_sequence, "per-sequence means"),
            (loss_pad_zero, "hard-coded as 0"),
        ],
    ),
    (check_greedy_search, good_greedy, [(greedy_without_stopping_rows, "keep writing eos")]),
    (
        check_beam_step,
        good_beam_step,
        [
            (beam_step_per_beam, "compare all K*V candidates"),
            (beam_step_without_scores, "scores so far are missing"),
        ],
    ),
    (check_additive_score, good_additive, [(additive_without_tanh, "tanh is missing")]),
    (
        check_luong_step,
        good_luong,
        [(luong_without_mask, "padding positions got weight"), (luong_state_first, "the context first")],
    ),
    (check_local_weights, good_local, [(local_without_gaussian, "Gaussian factor")]),
]


@pytest.mark.parametrize("check,good,mistakes", CHECKS, ids=[c[0].__name__ for c in CHECKS])
def test_check_passes_on_a_correct_answer(check, good, mistakes, capsys):
    result = check(good)
    assert isinstance(result, CheckResult) and result.name == check.__name__, result
    assert f"✓ {check.__name__}: all" in capsys.readouterr().out


@pytest.mark.parametrize("check,good,mistakes", CHECKS, ids=[c[0].__name__ for c in CHECKS])
def test_check_fails_on_the_stub(check, good, mistakes):
    with pytest.raises(ExerciseNotAttempted, match="not implemented yet"):
        check(stub)


@pytest.mark.parametrize("check,good,mistakes", CHECKS, ids=[c[0].__name__ for c in CHECKS])
def test_check_names_typical_mistakes(check, good, mistakes):
    for mistake, phrase in mistakes:
        fails_with(check, mistake, "Likely cause", phrase, "Hint (")


def test_check_reports_an_exception_of_the_learners_code():
    def broken(logits, tgt_out, pad_id):
        return logits.view(-1) @ tgt_out  # shape error

    with pytest.raises(ExerciseFailure, match="your function raised RuntimeError"):
        check_sequence_loss(broken)


def test_a_greedy_search_that_shapes_its_tokens_like_the_state_is_named():
    """The decoder's state may be a (B, H) tensor: the tokens are (B,) whatever the state."""

    def like_the_state(step, state, bos_id, eos_id, max_len):
        y, out = torch.full_like(state, bos_id), []
        done = torch.zeros(len(state), dtype=torch.bool)
        for _ in range(max_len):
            logits, state = step(y, state)
            y = logits.argmax(-1).masked_fill(done, eos_id)
            done |= y == eos_id
            out.append(y)
            if done.all():
                break
        return torch.stack(out, 1)

    with pytest.raises(ExerciseFailure, match="the state is a .B, H. float tensor"):
        check_greedy_search(like_the_state)
