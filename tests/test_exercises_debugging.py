"""The debugging exercises (issue 24: one per part of the book; issue 36: the student finds the bug
by a measurement). Each suspect component really is wrong (its fix's check fails it); the check's
message on the suspect, and on typical wrong fixes, reports what a measurement of the result shows
(which quantity, by how much) and never the fix, on the stored cases and on the hidden ones; the
chapter prints neither the right component nor a hint that names the fix; and the measurement the
exercise asks for finds the bug: on three seeds it separates the suspect from the right component
by the margin declared here."""

import re
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn.functional as F

from course_lib.exercises import (
    ExerciseFailure,
    check_causal_mask,
    check_decoder_layer,
    check_lstm_step,
    check_source_mask,
    debugging,
)
from coursekit.grading import hidden_cases
from coursekit.grading.checks.debugging import SUSPECTS
from coursekit.release.outline import read_exercises

torch.set_num_threads(1)
SEEDS = [0, 1, 2]
BOOK = Path(__file__).resolve().parent.parent / "book"

# (check, suspect, what the message must report: a measured quantity with its numbers)
SYMPTOMS = {
    "lstm_step": (
        check_lstm_step,
        debugging.suspect_lstm_step,
        r"your step keeps 0\.5 of its cell state per step \(c'/c\), where a right LSTM step keeps 0\.953",
    ),
    "source_mask": (
        check_source_mask,
        debugging.suspect_source_mask,
        r"source \d \(length \d, padded to S = \d\): its attention output changes by [0-9.]+ when only "
        r"its padding changes \(with a right mask it does not change\)",
    ),
    "causal_mask": (
        check_causal_mask,
        debugging.suspect_causal_mask,
        r"in 4 of its 5 rows \(first row 0\) your mask lets query t read up to 1 later key\(s\) s > t|"
        r"in 2 of its 3 rows \(first row 0\) your mask lets query t read up to 1 later key\(s\) s > t",
    ),
    "decoder_layer": (
        check_decoder_layer,
        debugging.suspect_decoder_layer,
        r"the rows of your output differ across the \d target positions by at most [0-9.e-]+, where a "
        r"right layer's differ by up to [0-9.]+",
    ),
}

# What would give each fix away: the bug named, or the right line written out.
FIX_WORDS = {
    "lstm_step": re.compile(r"swap|order|unpack|block 0|i, f|f, i|keep, write", re.I),
    "source_mask": re.compile(
        r"off by one|<=|compare with <|< length|length - 1|lengths - 1|last real", re.I
    ),
    "causal_mask": re.compile(r"tril|triu|<=|from 0|from 1|\+ 1|one key ahead", re.I),
    "decoder_layer": re.compile(r"residual|x \+|norm_?\w*\(x|sublayer_?k|wrapped the same", re.I),
}


def failure(check, fn):
    check.reset_hints()
    with pytest.raises(ExerciseFailure) as info:
        check(fn)
    return str(info.value)


def findings(message):
    """The message without its hint: what the check reports (the hints are tested apart)."""
    return "\n".join(line for line in message.splitlines() if not line.strip().startswith("Hint ("))


@pytest.mark.parametrize("name", sorted(SYMPTOMS))
def test_the_check_reports_a_measurement_of_the_suspect_never_its_fix(name):
    check, suspect, symptom = SYMPTOMS[name]
    for hidden in (False, True):
        if hidden:
            with hidden_cases():
                message = failure(check, suspect)
        else:
            message = failure(check, suspect)
        print(message)
        assert re.search(symptom, message), message
        named = FIX_WORDS[name].search(findings(message))
        assert not named, (named, message)
        assert "first at index" not in message and "Expected [[" not in message, message


def test_the_checks_measure_typical_wrong_fixes_too():
    """A fix that goes one step too far, or halfway, is reported as what it does."""
    dropped_last = failure(
        check_source_mask, lambda lengths, S: torch.arange(S)[None, :] < lengths[:, None] - 1
    )
    assert "its output does not change when its real position 4 changes" in dropped_last, dropped_last
    assert "ignores its last word" in dropped_last

    no_self = failure(check_causal_mask, lambda T: torch.arange(T)[None, :] < torch.arange(T)[:, None])
    assert "in 5 of its 5 rows (first row 0) your mask keeps up to 1 of the keys 0..t hidden" in no_self

    def both_gates_forget(x_proj, state, weight_hh, bias_hh=None):  # keep and write from block 1
        h, c = state
        blocks = (x_proj + F.linear(h, weight_hh, bias_hh)).split(c.shape[-1], dim=-1)
        gate = torch.sigmoid(blocks[1])
        c = gate * c + gate * torch.tanh(blocks[2])
        return torch.sigmoid(blocks[3]) * torch.tanh(c), c

    message = failure(check_lstm_step, both_gates_forget)  # passes the probe, fails a random case
    assert "case 2 of 4" in message and "values differ" in message, message
    assert not FIX_WORDS["lstm_step"].search(findings(message)), message

    def half_post_ln(layer, x, memory, self_mask=None, memory_mask=None):  # residual added pre-LN
        x = layer.norm1(x + layer.self_attn(x, x, x, self_mask)[0])
        x = x + layer.multihead_attn(layer.norm2(x), memory, memory, memory_mask)[0]
        return layer.norm3(x + layer.linear2(F.relu(layer.linear1(x))))

    message = failure(check_decoder_layer, half_post_ln)
    assert "values differ" in message and not FIX_WORDS["decoder_layer"].search(findings(message)), message


@pytest.mark.parametrize("name", sorted(SYMPTOMS))
def test_the_hints_lead_to_a_measurement_and_name_no_fix(name):
    check = SYMPTOMS[name][0]
    assert check.hints[0].startswith("Measure before reading"), check.hints
    for hint in check.hints:
        assert not FIX_WORDS[name].search(hint), (check.name, hint)


# chapter, exercise label, the right component's listing that the page must not print
PAGES = [
    ("02_lstm_and_gru.ipynb", "ex-lstm-forgets", "rnn.lstm_step", "lstm_step"),
    ("04_attention_in_seq2seq.ipynb", "ex-padding-reads", "A.padding_mask", "source_mask"),
    ("05_scaled_dot_product_attention.ipynb", "ex-reads-future", "A.causal_mask", "causal_mask"),
    ("09_transformer.ipynb", "ex-loses-place", "TR.DecoderLayer.forward", "decoder_layer"),
]


@pytest.mark.parametrize("page, label, right, name", PAGES, ids=[p[1] for p in PAGES])
def test_the_page_prints_no_fix(page, label, right, name):
    nb = nbformat.read(BOOK / page, as_version=4)
    listings = [c.source for c in nb.cells if c.cell_type == "code" and "show_source(" in c.source]
    assert not [s for s in listings if f"show_source({right})" in s], listings
    (exercise,) = [ex for ex in read_exercises(nb) if ex.label == label]
    statement = nb.cells[exercise.statement].source
    hints = re.findall(r"```\{admonition\} Hint \d+\n:class: dropdown\n(.*?)```", statement, re.S)
    assert len(hints) >= 2, statement
    for hint in hints:
        assert not FIX_WORDS[name].search(hint), (label, hint)


def test_each_suspect_is_written_unlike_the_chapters_code():
    """No line of a suspect is a line of the component it breaks (a line-by-line diff is not the
    route to the bug)."""
    import inspect

    from course_lib import attention, rnn

    pairs = [
        (debugging.suspect_lstm_step, rnn.lstm_step),
        (debugging.suspect_source_mask, attention.padding_mask),
        (debugging.suspect_causal_mask, attention.causal_mask),
    ]
    for suspect, right in pairs:
        body = lambda f: {l.split("#")[0].strip() for l in inspect.getsource(f).splitlines()[2:]}  # noqa: E731
        shared = {l for l in body(suspect) & body(right) if len(l) > 12 and not l.startswith(('"', "h, c"))}
        assert not shared, (suspect.__name__, shared)


# (suspect's measurement, right component's measurement) -> the bug is found
MARGINS = {
    "lstm_step": lambda bad, good: good > 1.0 and bad < 1e-3 * good,  # the gradient 50 steps back
    "source_mask": lambda bad, good: good < 1e-6 and bad > 1e-3,  # the output moves with padding
    "causal_mask": lambda bad, good: good < 1e-6 and bad > 0.1,  # position t reads t + 1
    "decoder_layer": lambda bad, good: good > 5 * bad,  # the gradient reaching the decoder's input
}


@pytest.mark.parametrize("name", sorted(SUSPECTS))
def test_the_measurement_finds_the_bug(name):
    bad, good, measure = SUSPECTS[name]
    for seed in SEEDS:
        b, g = measure(bad, seed=seed), measure(good, seed=seed)
        print(f"{name}, seed {seed}: suspect {b:.3g}, right {g:.3g}")
        assert MARGINS[name](b, g), (name, seed, b, g)
