"""The README's learner route, run verbatim in a fresh virtual environment: its commands install
course_lib with the `lab` extra, write the learner edition, and start a JupyterLab that serves the
first chapter.

The commands are read from the README's code block under "For learners", so the test follows the
README. Two adaptations, both said here: the repository is copied instead of cloned (the test
checks this checkout, which CI has cloned), and the last command, `jupyter lab NOTEBOOK`, gets
`--no-browser`, a free port and a token so that the test can ask the server for the notebook
(and `--allow-root` where the tests run as root, as in CI's container).
CPU torch is installed first, as the README advises (`pip install torch==2.13.0`).
"""

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def learner_commands():
    section = README.split("## For learners", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```\n(.*?)```", section, re.S).group(1)
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.split("#", 1)[0].strip()]


def test_the_readme_route_is_what_this_test_runs():
    commands = learner_commands()
    assert commands[0].startswith("git clone ") and commands[0].endswith("cd course"), commands[0]
    assert any(c.startswith('pip install -e ".[lab]"') for c in commands), commands
    assert commands[-1].startswith("jupyter lab "), commands[-1]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _copy_checkout(dest):
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for rel in filter(None, tracked.decode().split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


@pytest.mark.slow
def test_the_readme_learner_route_opens_jupyterlab(tmp_path):
    course = tmp_path / "course"
    course.mkdir()
    _copy_checkout(course)
    *setup, launch = learner_commands()[1:]  # the first line clones; we copied this checkout
    venv_bin = course / ".venv" / "bin"
    script = [
        "set -euo pipefail",
        f"{sys.executable} -m venv .venv",
        ". .venv/bin/activate",
        "pip install --quiet torch==2.13.0",
    ]
    script += [c for c in setup if not c.startswith("python -m venv")]  # made above, from this Python
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    done = subprocess.run(
        ["bash", "-c", "\n".join(script)], cwd=course, env=env, capture_output=True, text=True, timeout=1500
    )
    output = f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, f"the README's commands failed:\n{output}"
    notebook = launch.split()[-1]
    assert (course / notebook).is_file(), f"{notebook} was not written by the README's commands"

    port, token = _free_port(), "learner-route-test"
    as_root = " --allow-root" if os.geteuid() == 0 else ""
    server = subprocess.Popen(
        [
            "bash",
            "-c",
            f". .venv/bin/activate && {launch} --no-browser --port={port} "
            f"--ServerApp.token={token} --ServerApp.ip=127.0.0.1{as_root}",
        ],
        cwd=course,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        # `jupyter lab FILE` serves FILE's folder as its root and opens FILE
        url = f"http://127.0.0.1:{port}/api/contents/{Path(notebook).name}?token={token}&content=0"
        deadline, last = time.monotonic() + 120, None
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    body = response.read().decode()
                break
            except OSError as error:
                last = error
                assert server.poll() is None, f"jupyter lab exited: {server.stdout.read()[-3000:]}"
                time.sleep(1)
        else:
            pytest.fail(f"jupyter lab did not serve {notebook} within 120 s: {last}")
        assert '"type": "notebook"' in body or '"type":"notebook"' in body, body[:500]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token={token}", timeout=10) as response:
            assert response.status == 200
        assert (venv_bin / "jupyter-lab").exists()
    finally:
        server.terminate()
        server.wait(timeout=30)
