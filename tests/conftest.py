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


@pytest.fixture
def one_thread():
    """One torch thread for the test, restored after: tiny models train several times faster on
    one thread (and a shared machine wants it)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny_lm():
    """tiny_models.tiny_char_lm(): an untrained GRU character LM, its vocabulary and its text."""
    from tiny_models import tiny_char_lm

    return tiny_char_lm()


@pytest.fixture(scope="session")
def server():
    """The built site on http://127.0.0.1:<port> (skips, or fails under CI=true, if it cannot run)."""
    yield from serve_site()


@pytest.fixture(scope="session")
def browser(server):
    """Debian's Chromium, headless, driven by Playwright."""
    yield from launch_browser()
