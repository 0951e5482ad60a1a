"""The engine's behaviour on small records made up here: numbers, predictions, tolerances,
hints in steps, errors of the learner's code, what is off limits, the data the checks read, and
the guards that make records hard to misuse."""

import copy

import pytest
import torch

from check_failures import failure
from course_lib.exercises import (
    REGISTRY,
    Answer,
    Check,
    ExerciseNotAttempted,
    Forbidden,
    Mistake,
    Prediction,
    within,
)
from course_lib.exercises._data import build, decode, encode
from course_lib.exercises._engine import RunCase, WrongResult, set_case_source
from coursekit.grading import lib, load

# What the made-up records of a test compare with: {name: (cases, reference, mistakes)} or, for
# an Answer, {name: (value, mistake values)}; the data files of the real checks are not touched.
MADE_UP = {}


def _source(record):
    cases, reference, mistakes = MADE_UP[record.name]
    if isinstance(record, Answer):
        return cases, reference

    def outcome(fn, args, kwargs):
        try:
            return ("result", record.run(fn, copy.deepcopy(args), copy.deepcopy(kwargs)))
        except Exception as exc:
            return ("error", type(exc).__name__, str(exc))

    return [
        RunCase(
            description,
            make=lambda a=args, k=kwargs: (copy.deepcopy(a), copy.deepcopy(k)),
            expected=record.run(reference, copy.deepcopy(args), copy.deepcopy(kwargs)),
            outcome=lambda i, a=args, k=kwargs: outcome(mistakes[i], a, k) if i < len(mistakes) else None,
        )
        for description, args, kwargs in cases
    ]


@pytest.fixture
def made_up():
    """Records made in a test read their cases from MADE_UP and leave the registry afterwards."""
    before = set(REGISTRY)
    previous = set_case_source(_source)
    yield MADE_UP
    set_case_source(previous)
    MADE_UP.clear()
    for name in set(REGISTRY) - before:
        del REGISTRY[name]


def double_check(made_up, **kw):
    made_up["check_double_for_test"] = (
        [("a vector", (torch.tensor([1.0, 2.0]),), {}), ("a matrix", (torch.ones(2, 2),), {})],
        lambda x: x + x,
        [lambda x: x + 1, lambda x: x * x, lambda x: x.reshape(3)],
    )
    return Check(
        "check_double_for_test",
        "fn(x) -> 2 x",
        params=("x",),
        mistakes=[Mistake("that is x + 1"), Mistake("that is x squared"), Mistake("x.T fails on a vector")],
        hints=["step one", "step two"],
        no_shortcut="a made-up check",
        **kw,
    )


def test_a_check_names_case_difference_cause_and_hint_step(made_up):
    check = double_check(made_up)
    message = failure(check, lambda x: x + 1)
    assert message.splitlines() == [
        "check_double_for_test: hidden case 1 of 2 (a vector; inputs: x=(2,) float32) failed.",
        "  result: values differ (max abs error 1); first difference at index [1]: expected 4, got 3.",
        "  Likely cause: that is x + 1",
        "  Hint (1 of 2): step one",
    ]
    assert "Hint (2 of 2): step two" in failure(check, lambda x: x * x)
    assert "Hint (2 of 2): step two" in failure(check, lambda x: x * x)


def test_a_learner_error_is_matched_with_a_mistake_that_raises_the_same(made_up):
    message = failure(double_check(made_up), lambda x: x.reshape(3))
    assert "your function raised RuntimeError" in message and "x.reshape(3)" in message
    assert "Likely cause: x.T fails on a vector" in message


def test_unknown_wrong_answers_get_no_cause(made_up):
    message = failure(double_check(made_up), lambda x: 3 * x)
    assert "Likely cause" not in message and "expected 2, got 3" in message


def test_a_call_may_reject_the_form_of_a_result(made_up):
    def observe(fn, x):
        out = fn(x)
        if not isinstance(out, torch.Tensor):
            raise WrongResult("return a tensor")
        return out

    check = double_check(made_up, call=observe)
    assert "return a tensor" in failure(check, lambda x: [1.0])
    assert check(lambda x: 2 * x)


def test_inputs_are_fresh_for_each_function(made_up):
    def mutating(x):
        out = 2 * x
        x.zero_()
        return out

    assert double_check(made_up)(mutating)


def test_what_is_off_limits_is_refused_however_it_is_reached(made_up):
    from course_lib import attention
    from course_lib.attention import causal_mask as bound_early

    made_up["check_tril_for_test"] = ([("T = 3", (3,), {})], lambda T: torch.ones(T, T).tril().bool(), [])
    check = Check(
        "check_tril_for_test",
        "fn(T) -> causal mask",
        params=("T",),
        mistakes=[],
        hints=["a", "b"],
        forbidden=[Forbidden("course_lib.attention.causal_mask")],
    )
    for shortcut in [
        attention.causal_mask,
        bound_early,
        lambda T: bound_early(T),
        lambda T: attention.causal_mask(T),
    ]:
        message = failure(check, shortcut)
        assert "called course_lib.attention.causal_mask, which this exercise puts off limits" in message
    assert check(lambda T: torch.ones(T, T, dtype=torch.bool).tril())


def test_a_condition_limits_what_is_refused(made_up):
    import torch.nn.functional as F

    made_up["check_ce_for_test"] = (
        [
            (
                "three rows",
                (torch.randn(3, 4, generator=torch.Generator().manual_seed(0)), torch.tensor([0, 1, 2])),
                {},
            )
        ],
        lambda x, t: F.cross_entropy(x, t),
        [],
    )
    check = Check(
        "check_ce_for_test",
        "fn(logits, targets) -> loss",
        params=("logits", "targets"),
        mistakes=[],
        hints=["a", "b"],
        forbidden=[Forbidden("torch.nn.functional.cross_entropy", when=lambda a: a["reduction"] == "sum")],
    )
    assert check(lambda x, t: F.cross_entropy(x, t))
    assert "off limits" in failure(check, lambda x, t: F.cross_entropy(x, t, reduction="sum") / 3)


def test_a_check_must_say_what_is_off_limits_or_why_nothing_is(made_up):
    with pytest.raises(ValueError, match="forbidden=.*no_shortcut="):
        Check("check_nothing_for_test", "d", params=("x",), mistakes=[], hints=["a", "b"])


def test_registry_guards(made_up):
    double_check(made_up)
    with pytest.raises(ValueError, match="two checks are named check_double_for_test"):
        double_check(made_up)
    with pytest.raises(ValueError, match="starts with 'check_'"):
        Answer("answer_x", "d", quantity="q", tolerance=within(rel=0.1), mistakes=[], hints=[])
    with pytest.raises(TypeError, match="hints is a list of steps"):
        Answer("check_x_for_test", "d", quantity="q", tolerance=within(rel=0.1), mistakes=[], hints="one")
    with pytest.raises(TypeError, match="map the measurement"):
        Prediction(
            "check_p_for_test", "d", quantity="q", tolerance=within(rel=0.1), explanation="e", example=1.0,
            mistakes=[Mistake("no function")],
        )  # fmt: skip


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


def answer_record(made_up):
    made_up["check_answer_for_test"] = (10.0, [8.0, 11.0], None)
    return Answer(
        "check_answer_for_test",
        "the number 10",
        quantity="ten",
        tolerance=within(abs=0.5),
        mistakes=[Mistake("counted in base 8"), Mistake("off by one")],
        hints=["count", "count again"],
    )


def test_an_answer(made_up, capsys):
    check = answer_record(made_up)
    assert check(torch.tensor(10.2))
    assert capsys.readouterr().out == "✓ check_answer_for_test: 10.2 is right (within ±0.5 of ten).\n"
    message = failure(check, 8)
    assert "8 is not within ±0.5 of ten." in message
    assert "Likely cause: counted in base 8" in message and "10" not in message.split("Hint")[0]
    assert "expected a number" in failure(check, "ten")
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


def test_a_prediction_explains_either_way_and_an_honest_miss_does_not_raise(made_up, capsys):
    check = prediction_record()
    assert check(30, 42.0).hit is True
    out = capsys.readouterr().out
    assert out.startswith(
        "✓ check_prediction_for_test: you predicted 30; the experiment measured "
        "42: within a factor of 2.\n  Why: because"
    )
    result = check(4, 42.0)
    out = capsys.readouterr().out
    assert result.hit is False
    assert out.startswith(
        "✗ check_prediction_for_test: you predicted 4; the experiment measured 42: "
        "too low by a factor of 10.5"
    )
    assert "Likely misconception: far too small" in out and "Why: because" in out
    assert "the measurement must be a number" in failure(check, 4, None)
    with pytest.raises(ExerciseNotAttempted, match="BEFORE you run the experiment"):
        check(None, 42.0)


def test_a_prediction_asks_for_its_reasoning_when_the_page_does(made_up, capsys):
    check = prediction_record()
    for missing in [None, "", "because"]:
        with pytest.raises(ExerciseNotAttempted, match="say in one sentence"):
            check(30, 42.0, missing)
    assert check(300, 42.0, "the spread grows with the square root of d").hit is False


def test_data_round_trip_keeps_modules_generators_and_containers():
    torch.manual_seed(0)
    lstm = build("rnn.LSTM", 3, 4, num_layers=2).eval()
    g = torch.Generator().manual_seed(5)
    value = {"a": (lstm, [torch.arange(3), 2.5, None]), "g": g, "s": "text"}
    back = decode(encode(value))
    assert back["s"] == "text" and back["a"][1][1] == 2.5 and back["a"][1][2] is None
    assert torch.equal(back["a"][1][0], torch.arange(3))
    assert type(back["a"][0]) is type(lstm) and not back["a"][0].training
    x = torch.randn(2, 5, 3)
    assert torch.equal(back["a"][0](x)[0], lstm(x)[0])
    assert torch.equal(torch.rand(3, generator=back["g"]), torch.rand(3, generator=g))
    with pytest.raises(TypeError, match="build"):
        encode(torch.nn.Linear(2, 2))


def test_lib_resolves_lazily_and_falls_back_to_older_homes():
    fn = lib("no_such_module.f", "attention.causal_mask")
    assert fn.paths == ("no_such_module.f", "attention.causal_mask")
    assert fn(2).tolist() == [[True, False], [True, True]]
    with pytest.raises(ImportError):
        load("no_such_module.f")
    with pytest.raises(AttributeError):
        load("attention.no_such_function")


def test_a_prediction_shows_the_measurement_to_three_digits(capsys):
    """A measured mean or timing is shown as the learner reads it, not with float noise."""
    check = prediction_record()
    check(30, 23.4496123)
    assert "the experiment measured 23.4: within a factor of 2" in capsys.readouterr().out
    check(2000, 1234.5)
    assert "the experiment measured 1,234: within a factor of 2" in capsys.readouterr().out
