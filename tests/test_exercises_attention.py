"""Each exercise check passes on a correct solution, and fails helpfully on the stub and on
typical wrong answers."""

import inspect
import math
import re

import pytest
import torch

import check_failures
from course_lib import attention
from course_lib.exercises import (
    CheckResult,
    ExerciseFailure,
    ExerciseNotAttempted,
    check_attention,
    check_causal_mask,
    check_masked_softmax,
    check_scaled_dot_score,
)


# ---- learners' answers: correct ones, written the way a student would --------------------
def good_score(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])


def good_softmax(scores, mask):
    w = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return torch.nan_to_num(w, nan=0.0)


def good_causal(T):
    return torch.tril(torch.ones(T, T, dtype=torch.bool))


def good_attention(q, k, v, mask=None):
    scores = good_score(q, k)
    if mask is None:
        mask = torch.ones(scores.shape[-2:], dtype=torch.bool)
    weights = good_softmax(scores, mask)
    return weights @ v, weights


def stub(*args, **kwargs):
    raise NotImplementedError("Exercise: write your solution here")


# ---- typical mistakes -----------------------------------------------------------------
def unscaled_score(q, k):
    return q @ k.transpose(-2, -1)


def score_over_dk(q, k):
    return q @ k.transpose(-2, -1) / q.shape[-1]


def score_kq(q, k):
    return k @ q.transpose(-2, -1) / math.sqrt(q.shape[-1])


def score_typo(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) / notdefined  # noqa: F821


def softmax_nan(scores, mask):
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)


def softmax_inverted(scores, mask):
    return good_softmax(scores, ~mask)


def softmax_wrong_dim(scores, mask):
    w = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-2)
    return torch.nan_to_num(w, nan=0.0)


def softmax_big_negative(scores, mask):
    return torch.softmax(scores.masked_fill(~mask, -1e9), dim=-1)


def softmax_unstable(scores, mask):
    e = torch.exp(scores) * mask
    s = e.sum(-1, keepdim=True)
    return torch.where(s > 0, e / s, torch.zeros_like(e))


def softmax_ignores_mask(scores, mask):
    return torch.softmax(scores, dim=-1)


def causal_inverted(T):
    return ~good_causal(T)


def causal_float(T):
    return torch.tril(torch.ones(T, T))


def causal_upper(T):
    return good_causal(T).T.contiguous()


def causal_no_diag(T):
    return torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)


def attention_unscaled(q, k, v, mask=None):
    return good_attention(q * math.sqrt(q.shape[-1]), k, v, mask)


def attention_inverted(q, k, v, mask=None):
    return good_attention(q, k, v, None if mask is None else ~mask)


def attention_wrong_dim(q, k, v, mask=None):
    scores = good_score(q, k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-2))
    return weights @ v, weights


def attention_swapped(q, k, v, mask=None):
    out, weights = good_attention(q, k, v, mask)
    return weights, out


def attention_nan(q, k, v, mask=None):
    scores = good_score(q, k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def attention_no_default(q, k, v, mask):
    return good_attention(q, k, v, mask)


# ---- helpers ---------------------------------------------------------------------------
CHECKS = {
    "check_scaled_dot_score": (check_scaled_dot_score, good_score),
    "check_masked_softmax": (check_masked_softmax, good_softmax),
    "check_causal_mask": (check_causal_mask, good_causal),
    "check_attention": (check_attention, good_attention),
}
REFERENCE_SOURCES = [
    inspect.getsource(f)
    for f in (
        attention.scaled_dot_score,
        attention.masked_softmax,
        attention.causal_mask,
        attention.scaled_dot_product_attention,
    )
]


def failure(check, fn) -> str:
    message = check_failures.failure(check, fn)
    assert_no_reference_source(message)
    return message


def assert_no_reference_source(message):
    for source in REFERENCE_SOURCES:
        body = [ln.strip() for ln in source.splitlines()[1:] if len(ln.strip()) > 25]
        assert not any(ln in message for ln in body), message


# ---- tests -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", CHECKS)
def test_passes_on_a_correct_solution(name, capsys):
    check, solution = CHECKS[name]
    result = check(solution)
    assert result and isinstance(result, CheckResult)
    assert re.search(rf"✓ {name}: all [4-9] cases passed", capsys.readouterr().out)


@pytest.mark.parametrize("name", CHECKS)
def test_the_library_reference_is_off_limits(name):
    check, _ = CHECKS[name]
    ref = {
        "check_scaled_dot_score": attention.scaled_dot_score,
        "check_masked_softmax": attention.masked_softmax,
        "check_causal_mask": attention.causal_mask,
        "check_attention": attention.scaled_dot_product_attention,
    }[name]
    with pytest.raises(ExerciseFailure, match=rf"called course_lib.attention.{ref.__name__}, which"):
        check(ref)


@pytest.mark.parametrize("name", CHECKS)
def test_stub_is_reported_as_not_attempted(name):
    check, _ = CHECKS[name]
    with pytest.raises(ExerciseNotAttempted) as info:
        check(stub)
    err = info.value
    assert isinstance(err, NotImplementedError) and isinstance(err, ExerciseFailure)
    assert isinstance(err, AssertionError)
    assert isinstance(err.__cause__, NotImplementedError)
    assert "not implemented yet: replace the `raise NotImplementedError` line" in str(err)
    assert name in str(err)


def test_not_a_function():
    message = failure(check_causal_mask, good_causal(3))
    assert "expects a function" in message


def test_learner_exception_is_reported_with_case_and_line():
    message = failure(check_scaled_dot_score, score_typo)
    assert "your function raised NameError" in message
    assert "case 1 of 4 (T_q != T_k; inputs: q=(3, 4) float32, k=(5, 4) float32)" in message
    assert "score_typo" in message and "notdefined" in message
    assert "Hint (1 of 3)" in message


@pytest.mark.parametrize(
    "fn, case, cause",
    [
        (unscaled_score, "case 1 of 4 (T_q != T_k", "not scaled: divide by sqrt(d_k)"),
        (score_over_dk, "case 1 of 4 (T_q != T_k", "divided by d_k"),
        (score_kq, "case 1 of 4", "compute q @ k^T"),
    ],
)
def test_score_mistakes(fn, case, cause):
    message = failure(check_scaled_dot_score, fn)
    assert case in message and cause in message


def test_unscaled_score_fails_after_the_d_k_1_case_order_does_not_hide_it():
    # d_k = 1 makes scaling a no-op; the other cases must still catch it.
    message = failure(check_scaled_dot_score, unscaled_score)
    assert "max abs error" in message and "expected" in message


@pytest.mark.parametrize(
    "fn, case, cause",
    [
        (softmax_nan, "fully masked", "came out as NaN"),
        (softmax_inverted, "case 1 of 6 (random mask", "the mask is inverted"),
        (softmax_wrong_dim, "case 1 of 6 (random mask", "dim=-1"),
        (softmax_big_negative, "fully masked", "large negative number"),
        (softmax_unstable, "large scores (numerical stability)", "Subtract each row's max"),
        (softmax_ignores_mask, "case 1 of 6 (random mask", "the mask is ignored"),
    ],
)
def test_masked_softmax_mistakes(fn, case, cause):
    message = failure(check_masked_softmax, fn)
    assert case in message and cause in message
    assert "inputs: scores=" in message and "mask=" in message


def test_masked_softmax_message_has_first_difference():
    message = failure(check_masked_softmax, softmax_nan)
    assert "first difference at index [1, 0]: expected 0, got nan" in message


@pytest.mark.parametrize(
    "fn, cause",
    [
        (causal_inverted, "polarity is inverted"),
        (causal_float, "got torch.float32"),
        (causal_upper, "upper triangle"),
        (causal_no_diag, "diagonal is missing"),
    ],
)
def test_causal_mask_mistakes(fn, cause):
    message = failure(check_causal_mask, fn)
    assert "case" in message and "T = " in message and cause in message


def test_causal_mask_wrong_shape():
    message = failure(check_causal_mask, lambda T: torch.ones(T, dtype=torch.bool))
    assert "expected shape (5, 5), got shape (5,)" in message


@pytest.mark.parametrize(
    "fn, case, cause",
    [
        (attention_unscaled, "case 1 of 5 (no mask", "not scaled"),
        (attention_inverted, "case 2 of 5 (batch and heads with a padding mask", "mask is inverted"),
        (attention_wrong_dim, "case 1 of 5 (no mask", "dim=-1"),
        (attention_swapped, "case 1 of 5", "swapped"),
        (attention_nan, "fully masked", "NaN"),
    ],
)
def test_attention_mistakes(fn, case, cause):
    message = failure(check_attention, fn)
    assert case in message and cause in message


def test_attention_needs_mask_default():
    message = failure(check_attention, attention_no_default)
    assert "raised TypeError" in message and "case 1 of 5" in message


def test_attention_returns_a_pair():
    message = failure(check_attention, lambda q, k, v, mask=None: good_attention(q, k, v, mask)[0])
    assert "expected a tuple (out, weights)" in message


def test_inputs_are_not_shared_with_the_learner():
    def mutating(scores, mask):
        w = good_softmax(scores, mask)
        scores.zero_()
        mask.zero_()
        return w

    check_masked_softmax(mutating)  # raises ExerciseFailure if the mutation reached the reference


def test_result_is_silent_in_notebooks():
    result = CheckResult("check_x", "✓ check_x: all 3 cases passed")
    assert result._ipython_display_() is None
    assert str(result) == "✓ check_x: all 3 cases passed"


def test_failure_renders_without_a_long_traceback():
    err = ExerciseFailure("check_x: case 1 failed")
    assert err._render_traceback_() == ["\x1b[31mExerciseFailure\x1b[39m: check_x: case 1 failed"]
