"""Every check record, whatever its kind: the reference passes, the stub is "not attempted",
each recorded typical mistake fails with its own message, and (issue 24) each forbidden
shortcut is refused with a message that says the exercise asks the learner to write it.

The records are the public checks (``course_lib.exercises.REGISTRY``); their references, the
mistakes' implementations and the shortcuts stay with the grader (``coursekit.grading``).
"""

import pytest
import torch

import course_lib.exercises as exercises
from course_lib.exercises import (
    REGISTRY,
    Answer,
    Check,
    CheckResult,
    ExerciseFailure,
    ExerciseNotAttempted,
    Goal,
    Prediction,
)
from coursekit.grading import REFERENCES, examples, hidden_cases

torch.set_num_threads(1)
NAMES = sorted(REGISTRY)
CHECKS = [n for n in NAMES if isinstance(REGISTRY[n], Check)]

# The checks the chapters called before the records (issue 15): their names keep working.
PORTED = [
    "check_additive_score", "check_alibi_bias", "check_attention", "check_attention_flops",
    "check_beam_step", "check_bidirectional", "check_bits_per_char", "check_bptt_jacobian",
    "check_causal_mask", "check_clip_grad_norm", "check_cosine_similarity", "check_cross_attention",
    "check_decoder_layer", "check_greedy_decode", "check_greedy_search", "check_gru_cell",
    "check_key_padding_mask", "check_kv_cache_step", "check_local_weights", "check_luong_step",
    "check_masked_softmax", "check_merge_heads", "check_multihead_forward", "check_rnn_forward",
    "check_sample_next", "check_scaled_dot_score", "check_self_attention", "check_sequence_loss",
    "check_set_forget_bias", "check_shift_matrix", "check_shift_right", "check_sinusoidal_encoding",
    "check_split_heads", "check_temperature_probs",
]  # fmt: skip


def test_there_are_records_of_every_kind_and_the_old_names_work():
    assert len(PORTED) == 34 and set(PORTED) <= set(REGISTRY)
    assert all(callable(getattr(exercises, name)) for name in PORTED)
    assert {Check, Answer, Prediction} <= {type(r) for r in REGISTRY.values()}


def test_every_check_and_answer_has_a_reference_with_the_grader():
    from coursekit.grading import GoalReference

    graded = {n for n, r in REGISTRY.items() if isinstance(r, (Check, Answer))}
    goals = {n for n, r in REGISTRY.items() if isinstance(r, Goal)}
    assert graded == {n for n, r in REFERENCES.items() if not isinstance(r, GoalReference)}
    assert goals == {n for n, r in REFERENCES.items() if isinstance(r, GoalReference)}
    for name in graded:
        assert len(REFERENCES[name].mistakes) == len(REGISTRY[name].mistakes), name


@pytest.mark.parametrize("name", NAMES)
def test_the_right_answer_passes(name, capsys):
    record = REGISTRY[name]
    result = record(*examples(name)["right"])
    assert isinstance(result, CheckResult) and result.name == name
    out = capsys.readouterr().out
    assert out.startswith(f"✓ {name}: "), out


@pytest.mark.parametrize("name", NAMES)
def test_the_stub_is_not_attempted(name):
    record = REGISTRY[name]
    with pytest.raises(ExerciseNotAttempted) as info:
        record(*examples(name)["stub"])
    assert isinstance(info.value, NotImplementedError) and isinstance(info.value, AssertionError)
    assert str(info.value).startswith(f"{name}: no") or "not implemented yet" in str(info.value)


GRADED = [n for n in NAMES if isinstance(REGISTRY[n], (Check, Answer))]


@pytest.mark.parametrize("name", [n for n in NAMES if isinstance(REGISTRY[n], Goal)])
def test_a_goal_is_measured_names_the_usual_reasons_below_and_refuses_a_typed_number(name, capsys):
    """Issue 36: the check measures the learner's model; a model that misses fails with the
    usual reasons, and a typed number earns nothing (not even the bar's own value)."""
    record = REGISTRY[name]
    example = examples(name)
    with pytest.raises(ExerciseFailure) as info:
        record(*example["missed"])
    message = str(info.value)
    assert "the goal is" in message and all(m.message in message for m in record.mistakes)
    assert len(record.hints) >= 2 and record.doc
    for typed in (example["typed"][0], record.at_least or record.at_most, torch.tensor(0.99)):
        with pytest.raises(ExerciseFailure, match="got the number"):
            record(typed)


@pytest.mark.parametrize("name", GRADED)
def test_each_mistake_fails_with_its_own_message(name):
    record = REGISTRY[name]
    mistakes = examples(name)["mistakes"]
    assert len(mistakes) >= 2, f"{name} records {len(mistakes)} typical mistakes; at least 2"
    assert len({m.message for m, _ in mistakes}) == len(mistakes), "two mistakes share a message"
    for mistake, args in mistakes:
        with pytest.raises(ExerciseFailure) as info:
            record(*args)
        message = str(info.value)
        assert not isinstance(info.value, ExerciseNotAttempted), message
        label = getattr(record, "cause_label", "Likely cause")
        assert f"{label}: {mistake.message}" in message, (
            f"{name}: the mistake {mistake.message!r} was not named; the check said:\n{message}"
        )


@pytest.mark.parametrize("name", [n for n in NAMES if isinstance(REGISTRY[n], Prediction)])
def test_a_wrong_prediction_never_raises_and_names_its_misconception(name, capsys):
    record = REGISTRY[name]
    assert len(record.mistakes) >= 2 and len(record.explanation) > 80
    for mistake, args in examples(name)["mistakes"]:
        result = record(*args)
        out = capsys.readouterr().out
        assert result.hit is False and out.startswith(f"✗ {name}: "), out
        assert f"Likely misconception: {mistake.message}" in out and "Why: " in out


@pytest.mark.parametrize("name", CHECKS)
def test_each_forbidden_shortcut_is_refused(name):
    """Issue 24: a check cannot be passed by calling what the exercise asks you to write."""
    record = REGISTRY[name]
    shortcuts = examples(name)["shortcuts"]
    if not record.forbidden:
        assert record.no_shortcut and not shortcuts, f"{name}: nothing forbidden, yet shortcuts"
        return
    assert shortcuts, f"{name} forbids {[f.name for f in record.forbidden]} but no shortcut tests it"
    labels = {f.name for f in record.forbidden}
    for args in shortcuts:
        with pytest.raises(ExerciseFailure) as info:
            record(*args)
        message = str(info.value)
        assert "puts off limits" in message and "asks you to write it yourself" in message, message
        assert any(f"called {label}," in message for label in labels), message


def test_a_shortcut_caught_by_the_learners_own_code_is_still_refused():
    def sly(lengths, T):
        try:
            from course_lib.attention import padding_mask

            return padding_mask(lengths, T)
        except Exception:
            return (torch.arange(T) < lengths[:, None])[:, None, None, :]

    with pytest.raises(ExerciseFailure, match="called course_lib.attention.padding_mask"):
        exercises.check_padding_mask(sly)


def test_label_smoothing_is_refused_but_plain_cross_entropy_is_allowed(capsys):
    import torch.nn.functional as F

    def with_plain_ce(logits, target, eps, pad_id):
        real = target != pad_id
        nll = F.cross_entropy(logits[real], target[real], reduction="none")
        uniform = -logits[real].log_softmax(-1).mean(-1)
        return ((1 - eps) * nll + eps * uniform).mean()

    assert exercises.check_label_smoothed_loss(with_plain_ce)
    with pytest.raises(ExerciseFailure, match=r"F.cross_entropy\(..., label_smoothing=...\)"):
        exercises.check_label_smoothed_loss(
            lambda lg, t, eps, pad: F.cross_entropy(lg, t, ignore_index=pad, label_smoothing=eps)
        )


def test_autograd_is_refused_inside_enable_grad_and_grad_mode_is_restored():
    def by_autograd(q, k, v, grad_out):
        with torch.enable_grad():
            q = q.clone().requires_grad_()
            out = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, -1) @ v
            return torch.autograd.grad(out, q, grad_out)[0]

    with pytest.raises(ExerciseFailure, match=r"called torch.enable_grad\(\)"):
        exercises.check_attention_grad_q(by_autograd)
    assert torch.is_grad_enabled()


@pytest.mark.parametrize("name", GRADED)
def test_hints_come_in_steps(name):
    record = REGISTRY[name]
    hints = list(record.hints)
    assert len(hints) >= 2, f"{name}: {len(hints)} hint steps; at least 2"
    record.reset_hints()
    shown = []
    for _mistake, args in examples(name)["mistakes"][:1] * (len(hints) + 1):
        with pytest.raises(ExerciseFailure) as info:
            record(*args)
        shown.append(str(info.value).rsplit("  Hint (", 1)[1])
    for step, text in enumerate(shown[: len(hints)], 1):
        assert text.startswith(f"{step} of {len(hints)}): {hints[step - 1]}")
    assert shown[-1] == shown[-2], "after the last step, the last step stays"
    record.reset_hints()


@pytest.mark.parametrize("name", NAMES)
def test_is_public_under_its_name(name):
    record = REGISTRY[name]
    assert getattr(exercises, name) is record and name in exercises.__all__
    assert any(getattr(m, name, None) is record for m in exercises.CHAPTERS.values()), (
        f"bind the record to its own name in its topic module: {name} = {type(record).__name__}(...)"
    )
    assert record.__name__ == name and record.doc and record.__doc__ == record.doc


@pytest.mark.parametrize("name", GRADED)
def test_hidden_cases_pass_the_reference_and_fail_the_mistakes(name, capsys):
    record = REGISTRY[name]
    ex = examples(name)
    with hidden_cases():
        record(*ex["right"])
        if isinstance(record, Check):
            assert "hidden cases passed" in capsys.readouterr().out
        _mistake, args = ex["mistakes"][0]
        with pytest.raises(ExerciseFailure, match=getattr(record, "cause_label", "Likely cause")):
            record(*args)
