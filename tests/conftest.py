"""Fixtures shared by the test modules."""

import pytest

from site_browser import launch_browser, serve_site


@pytest.fixture(autouse=True)
def _hints_from_step_one():
    """Every test sees each exercise check's hints from step 1: a check counts its failures to
    show the next hint step, so without this a test's message would depend on the tests before it."""
    from course_lib.exercises._engine import REGISTRY

    for record in REGISTRY.values():
        record.reset_hints()


@pytest.fixture(scope="session")
def server():
    """The built site on http://127.0.0.1:<port> (skips, or fails under CI=true, if it cannot run)."""
    yield from serve_site()


@pytest.fixture(scope="session")
def browser(server):
    """Debian's Chromium, headless, driven by Playwright."""
    yield from launch_browser()


# Tests that take more than a few seconds on the course's 2-core machine (pytest --durations),
# besides those marked @pytest.mark.slow in place: `make test` runs them, `make test-fast`
# does not. Per test file: names of tests, or of module fixtures that make every test using
# them slow (they train or sweep models). tests/test_config_repository.py checks that every
# name still exists in its file.
SLOW = {
    "test_widgets_rnn.py": {
        "flow",
        "forget",
        "temperature",
        "tiny_lm",
        "test_gradient_reach_of_the_lstm_grows_with_the_forget_bias",
        "test_tanh_vanishes_below_and_at_gain_one_and_explodes_at_two",
        "test_specs_are_json_and_small",
    },  # builds them by name
    "test_unit_decoding.py": {"test_gpt_with_a_kv_cache_generates_what_it_generates_without"},
    "test_unit_recipes.py": {"test_train_transformer_learns_to_reverse"},
    "test_unit_seq2seq.py": {"test_padding_does_not_change_the_output", "test_learns_to_copy_short_strings"},
    "test_parity_rnn.py": {"test_lstm_matches_torch_at_a_realistic_size"},
    "test_release_student.py": {"test_synthetic_editions_run"},
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        names = SLOW.get(item.path.name)
        if names and (
            getattr(item, "originalname", None) in names or names & set(getattr(item, "fixturenames", ()))
        ):
            item.add_marker(pytest.mark.slow)
