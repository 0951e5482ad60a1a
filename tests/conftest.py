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
