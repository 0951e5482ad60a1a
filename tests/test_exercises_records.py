"""Every check record, whatever its kind: the right answer passes, the stub is "not attempted",
and each recorded typical mistake fails with its own message (issue 15, Deliver 5).

The records are the public checks (``course_lib.exercises.REGISTRY``); a new record is tested
here as soon as its module is imported by ``course_lib/exercises/__init__.py``.
"""

import inspect

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
    Prediction,
)
from course_lib.exercises._engine import load

torch.set_num_threads(1)
NAMES = sorted(REGISTRY)


# The checks the chapters called before the records (issue 15): their names keep working.
PORTED = [
    "check_additive_score",
    "check_alibi_bias",
    "check_attention",
    "check_attention_flops",
    "check_beam_step",
    "check_bidirectional",
    "check_bits_per_char",
    "check_bptt_jacobian",
    "check_causal_mask",
    "check_clip_grad_norm",
    "check_cosine_similarity",
    "check_cross_attention",
    "check_decoder_layer",
    "check_greedy_decode",
    "check_greedy_search",
    "check_gru_cell",
    "check_key_padding_mask",
    "check_kv_cache_step",
    "check_local_weights",
    "check_luong_step",
    "check_masked_softmax",
    "check_merge_heads",
    "check_multihead_forward",
    "check_rnn_forward",
    "check_sample_next",
    "check_scaled_dot_score",
    "check_self_attention",
    "check_sequence_loss",
    "check_set_forget_bias",
    "check_shift_matrix",
    "check_shift_right",
    "check_sinusoidal_encoding",
    "check_split_heads",
    "check_temperature_probs",
]


def test_there_are_records_of_every_kind_and_the_old_names_work():
    assert len(PORTED) == 34 and set(PORTED) <= set(REGISTRY)
    assert all(callable(getattr(exercises, name)) for name in PORTED)
    assert {Check, Answer, Prediction} <= {type(r) for r in REGISTRY.values()}


@pytest.mark.parametrize("name", NAMES)
def test_the_right_answer_passes(name, capsys):
    record = REGISTRY[name]
    result = record(*record.examples().right)
    assert isinstance(result, CheckResult) and result and result.name == name
    out = capsys.readouterr().out
    assert out.startswith(f"✓ {name}: "), out


@pytest.mark.parametrize("name", NAMES)
def test_the_stub_is_not_attempted(name):
    record = REGISTRY[name]
    with pytest.raises(ExerciseNotAttempted) as info:
        record(*record.examples().stub)
    assert isinstance(info.value, NotImplementedError) and isinstance(info.value, AssertionError)
    assert str(info.value).startswith(f"{name}: no") or "not implemented yet" in str(info.value)


@pytest.mark.parametrize("name", NAMES)
def test_each_mistake_fails_with_its_own_message(name):
    record = REGISTRY[name]
    mistakes = record.examples().mistakes
    assert len(mistakes) >= 2, f"{name} records {len(mistakes)} typical mistakes; at least 2"
    assert len({m.message for m, _ in mistakes}) == len(mistakes), "two mistakes share a message"
    for mistake, args in mistakes:
        with pytest.raises(ExerciseFailure) as info:
            record(*args)
        message = str(info.value)
        assert not isinstance(info.value, ExerciseNotAttempted), message
        assert f"Likely cause: {mistake.message}" in message, (
            f"{name}: the mistake {mistake.message!r} was not named; the check said:\n{message}"
        )


@pytest.mark.parametrize("name", NAMES)
def test_hints_come_in_steps(name):
    record = REGISTRY[name]
    if isinstance(record, Prediction):
        assert len(record.explanation) > 80, "a prediction explains the measurement"
        return
    hints = list(record.hints)
    assert len(hints) >= 2, f"{name}: {len(hints)} hint steps; at least 2"
    record._failures = 0
    shown = []
    for _mistake, args in record.examples().mistakes[:1] * (len(hints) + 1):
        with pytest.raises(ExerciseFailure) as info:
            record(*args)
        shown.append(str(info.value).rsplit("  Hint (", 1)[1])
    for step, text in enumerate(shown[: len(hints)], 1):
        assert text.startswith(f"{step} of {len(hints)}): {hints[step - 1]}")
    assert shown[-1] == shown[-2], "after the last step, the last step stays"
    record._failures = 0


@pytest.mark.parametrize("name", NAMES)
def test_is_public_under_its_name(name):
    record = REGISTRY[name]
    assert getattr(exercises, name) is record and name in exercises.__all__
    assert any(getattr(m, name, None) is record for m in exercises.CHAPTERS.values()), (
        f"bind the record to its own name in its topic module: {name} = {type(record).__name__}(...)"
    )
    assert record.__name__ == name and record.doc and record.__doc__ == record.doc


def _reference_source(record):
    paths = getattr(record.reference, "paths", None)
    fn = load(*paths) if paths else record.reference
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return ""


@pytest.mark.parametrize("name", [n for n in NAMES if isinstance(REGISTRY[n], Check)])
def test_messages_never_show_the_reference(name):
    record = REGISTRY[name]
    body = [
        ln.strip()
        for ln in _reference_source(record).splitlines()[1:]
        if len(ln.strip()) > 25 and not ln.strip().startswith(("#", '"""', "reference="))
    ]
    for _, args in record.examples().mistakes:
        try:
            record(*args)
        except ExerciseFailure as exc:
            leaked = [ln for ln in body if ln in str(exc)]
            assert not leaked, leaked
