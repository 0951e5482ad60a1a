"""Fixtures shared by the test modules."""

import pytest

from site_browser import launch_browser, serve_site


@pytest.fixture(scope="session")
def server():
    """The built site on http://127.0.0.1:<port> (skips, or fails under CI=true, if it cannot run)."""
    yield from serve_site()


@pytest.fixture(scope="session")
def browser(server):
    """Debian's Chromium, headless, driven by Playwright."""
    yield from launch_browser()
