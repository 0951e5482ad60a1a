"""The debugging exercises (issue 24: one per part of the book): each suspect component really is
wrong (its fix's check fails it), and the measurement the exercise asks for finds it: on three
seeds it separates the suspect from the right component by the margin declared here."""

import pytest
import torch

from course_lib.exercises import ExerciseFailure, check_causal_mask, check_decoder_layer, debugging
from coursekit.grading.checks.debugging import SUSPECTS

torch.set_num_threads(1)
SEEDS = [0, 1, 2]


def fails(check, fn, phrase=None):
    with pytest.raises(ExerciseFailure) as info:
        check(fn)
    assert phrase is None or phrase in str(info.value), str(info.value)


def test_each_suspect_fails_the_check_of_its_fix():
    fails(debugging.check_lstm_step, debugging.suspect_lstm_step, "input and forget gates are swapped")
    fails(debugging.check_source_mask, debugging.suspect_source_mask, "off by one")
    fails(check_causal_mask, debugging.suspect_causal_mask)
    fails(check_decoder_layer, debugging.suspect_decoder_layer)


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
