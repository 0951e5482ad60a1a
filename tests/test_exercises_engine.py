"""The engine's behaviour on small records made up here: numbers, predictions, tolerances,
hints in steps, errors of the learner's code, and the guards that make records hard to misuse."""

import pytest
import torch

from course_lib.exercises import (
    REGISTRY,
    Answer,
    Case,
    Check,
    ExerciseFailure,
    ExerciseNotAttempted,
    Mistake,
    Prediction,
    within,
)
from course_lib.exercises._engine import WrongResult, lib, load


@pytest.fixture
def made_up():
    """Records made in a test leave the registry afterwards."""
    before = set(REGISTRY)
    yield
    for name in set(REGISTRY) - before:
        del REGISTRY[name]


def double_check(**kw):
    return Check(
        "check_double_for_test",
        "fn(x) -> 2 x",
        params=("x",),
        reference=lambda x: x + x,
        cases=lambda g: [Case("a vector", torch.tensor([1.0, 2.0])), Case("a matrix", torch.ones(2, 2))],
        mistakes=[
            Mistake("that is x + 1", lambda x: x + 1),
            Mistake("that is x squared", lambda x: x * x),
            Mistake("x.T fails on a vector", lambda x: x.reshape(3)),
        ],
        hints=["step one", "step two"],
        **kw,
    )


def fail(record, *args):
    with pytest.raises(ExerciseFailure) as info:
        record(*args)
    return str(info.value)


def test_a_check_names_case_difference_cause_and_hint_step(made_up):
    check = double_check()
    message = fail(check, lambda x: x + 1)
    assert message.splitlines() == [
        "check_double_for_test: case 1 of 2 (a vector; inputs: x=(2,) float32) failed.",
        "  result: values differ (max abs error 1); first difference at index [1]: expected 4, got 3.",
        "  Likely cause: that is x + 1",
        "  Hint (1 of 2): step one",
    ]
    assert "Hint (2 of 2): step two" in fail(check, lambda x: x * x)
    assert "Hint (2 of 2): step two" in fail(check, lambda x: x * x)


def test_a_learner_error_is_matched_with_a_mistake_that_raises_the_same(made_up):
    message = fail(double_check(), lambda x: x.reshape(3))
    assert "your function raised RuntimeError" in message and "x.reshape(3)" in message
    assert "Likely cause: x.T fails on a vector" in message


def test_unknown_wrong_answers_get_no_cause(made_up):
    message = fail(double_check(), lambda x: 3 * x)
    assert "Likely cause" not in message and "expected 2, got 3" in message


def test_a_call_may_reject_the_form_of_a_result(made_up):
    def observe(fn, x):
        out = fn(x)
        if not isinstance(out, torch.Tensor):
            raise WrongResult("return a tensor")
        return out

    check = double_check(call=observe)
    assert "return a tensor" in fail(check, lambda x: [1.0])
    assert check(lambda x: 2 * x)


def test_inputs_are_copied_for_each_function(made_up):
    def mutating(x):
        out = 2 * x
        x.zero_()
        return out

    assert double_check()(mutating)


def test_the_global_random_state_is_left_alone(made_up):
    check = Check(
        "check_noise_for_test",
        "fn(x) -> x",
        params=("x",),
        reference=lambda x: x,
        cases=lambda g: [Case("random", torch.randn(3))],
        mistakes=[Mistake("a", lambda x: x + 1), Mistake("b", lambda x: x - 1)],
        hints=["h", "i"],
        seed=3,
    )
    torch.manual_seed(0)
    expected = torch.rand(2)
    torch.manual_seed(0)
    check(lambda x: x)
    assert torch.equal(torch.rand(2), expected)


def test_registry_guards(made_up):
    double_check()
    with pytest.raises(ValueError, match="two checks are named check_double_for_test"):
        double_check()
    with pytest.raises(ValueError, match="starts with 'check_'"):
        Answer(
            "answer_x",
            "d",
            quantity="q",
            reference=lambda: 1.0,
            tolerance=within(rel=0.1),
            mistakes=[],
            hints=[],
        )
    with pytest.raises(TypeError, match="hints is a list of steps"):
        Answer(
            "check_x_for_test",
            "d",
            quantity="q",
            reference=lambda: 1.0,
            tolerance=within(rel=0.1),
            mistakes=[],
            hints="one string",
        )


@pytest.mark.parametrize("kwargs", [{}, {"rel": 0.1, "abs": 1}, {"rel": -1}, {"factor": 1}])
def test_a_tolerance_is_exactly_one_positive_bound(kwargs):
    with pytest.raises(ValueError):
        within(**kwargs)


def test_tolerances():
    assert within(rel=0.1).accepts(105, 100) and not within(rel=0.1).accepts(111, 100)
    assert within(abs=2).accepts(-1, 1) and not within(abs=2).accepts(-1.5, 1)
    assert within(factor=2).accepts(50, 100) and within(factor=2).accepts(200, 100)
    assert not within(factor=2).accepts(201, 100) and not within(factor=2).accepts(-100, 100)
    assert [str(within(rel=0.25)), str(within(abs=2)), str(within(factor=1.5))] == [
        "within 25%",
        "within ±2",
        "within a factor of 1.5",
    ]


def answer_record():
    return Answer(
        "check_answer_for_test",
        "the number 10",
        quantity="ten",
        reference=lambda: 10.0,
        tolerance=within(abs=0.5),
        mistakes=[Mistake("counted in base 8", lambda: 8.0), Mistake("off by one", lambda: 11.0)],
        hints=["count", "count again"],
    )


def test_an_answer(made_up, capsys):
    check = answer_record()
    assert check(torch.tensor(10.2))
    assert capsys.readouterr().out == "✓ check_answer_for_test: 10.2 is within ±0.5 of 10, ten.\n"
    message = fail(check, 8)
    assert "8 is not within ±0.5 of ten (it is too low)" in message
    assert "Likely cause: counted in base 8" in message and "10" not in message.split("Hint")[0]
    assert "expected a number" in fail(check, "ten")
    with pytest.raises(ExerciseNotAttempted, match="no answer yet"):
        check(None)


def prediction_record():
    return Prediction(
        "check_prediction_for_test",
        "a prediction",
        quantity="the answer",
        tolerance=within(factor=2),
        example=40,
        explanation="because " * 20,
        mistakes=[Mistake("far too small", lambda m: m / 10), Mistake("far too large", lambda m: 10 * m)],
    )


def test_a_prediction_prints_the_explanation_either_way(made_up, capsys):
    check = prediction_record()
    assert check(30, 42.0)
    out = capsys.readouterr().out
    assert out.startswith(
        "✓ check_prediction_for_test: you predicted 30; the experiment measured "
        "42, within a factor of 2.\n  Why: because"
    )
    message = fail(check, 4, 42.0)
    assert "the prediction is too low (not within a factor of 2)" in message
    assert "Likely cause: far too small" in message and "Why: because" in message
    assert "the measurement must be a number" in fail(check, 4, None)
    with pytest.raises(ExerciseNotAttempted, match="BEFORE you run the experiment"):
        check(None, 42.0)


def test_lib_resolves_lazily_and_falls_back_to_older_homes():
    fn = lib("no_such_module.f", "attention.causal_mask")
    assert fn.paths == ("no_such_module.f", "attention.causal_mask")
    assert fn(2).tolist() == [[True, False], [True, True]]
    with pytest.raises(ImportError):
        load("no_such_module.f")
    with pytest.raises(AttributeError):
        load("attention.no_such_function")
