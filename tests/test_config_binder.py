"""The Binder environment (binder/, read by repo2docker instead of the root files).

binder/requirements.txt is the learner's environment: JupyterLab, the notebooks' imports and
course_lib, at the versions of the root lock, with a CPU-only torch. The last test resolves it
in a fresh virtual environment (slow). What cannot be checked here: an actual build on
mybinder.org (repo2docker and Docker, and PyTorch's CPU index, are out of reach).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
BINDER = ROOT / "binder"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# Provided by repo2docker's own environment (JupyterLab 4, jupyter_server 2): a range, not a
# pin, so that pip leaves the server stack repo2docker installed alone.
PROVIDED_BY_REPO2DOCKER = {"jupyterlab"}
LEARNER_NEEDS = {"torch", "numpy", "matplotlib", "tqdm", "ipywidgets", "anywidget", "jupyterlab"}
NOT_FOR_LEARNERS = {"jupyter-book", "pytest", "nbval", "playwright", "sphinx", "pytest-xdist"}


def _canon(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _lines(path: Path) -> list[str]:
    return [
        ln.split(" #", 1)[0].strip()
        for ln in path.read_text().splitlines()
        if ln.strip() and not ln.lstrip().startswith("#")
    ]


def _binder():
    """(options, {name: Requirement}, local paths) of binder/requirements.txt."""
    options, reqs, local = [], {}, []
    for line in _lines(BINDER / "requirements.txt"):
        if line.startswith("-"):
            options.append(line)
        elif line.startswith("."):
            local.append(line)
        else:
            req = Requirement(line)
            reqs[_canon(req.name)] = req
    return options, reqs, local


def _root_pins() -> dict[str, str]:
    return {
        _canon(name): version
        for name, version in (ln.split("==", 1) for ln in _lines(ROOT / "requirements.txt") if "==" in ln)
    }


def _pinned(req: Requirement) -> str | None:
    specs = list(req.specifier)
    return specs[0].version if len(specs) == 1 and specs[0].operator == "==" else None


def test_runtime_is_python_3_11():
    runtime = (BINDER / "runtime.txt").read_text().strip()
    assert runtime == "python-3.11"
    import tomllib

    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert Version(runtime.removeprefix("python-")) in SpecifierSet(requires)


def test_every_pin_is_the_root_lock_version():
    _, reqs, _ = _binder()
    root = _root_pins()
    for name, req in reqs.items():
        version = _pinned(req)
        if name in PROVIDED_BY_REPO2DOCKER:
            continue
        assert version, f"{req}: pin it (==), at the version of the root requirements.txt"
        assert name in root, f"{name} is in binder/requirements.txt but not in the root lock"
        assert Version(version).public == root[name], (
            f"{name}: binder pins {version}, the root requirements.txt {root[name]}"
        )


def test_torch_is_the_cpu_only_build():
    options, reqs, _ = _binder()
    torch_version = Version(_pinned(reqs["torch"]))
    assert torch_version.local == "cpu", "pin torch==X.Y.Z+cpu: PyPI's torch is a CUDA build"
    assert f"--extra-index-url {CPU_INDEX}" in options
    assert not any(o.startswith(("--index-url", "-i ")) for o in options), (
        "keep PyPI as the main index: only torch comes from PyTorch's"
    )


def test_learner_packages_and_course_lib_nothing_else():
    _, reqs, local = _binder()
    assert local == ["."], "course_lib is installed from the repository root with a '.' line"
    assert set(reqs) >= LEARNER_NEEDS, f"missing: {LEARNER_NEEDS - set(reqs)}"
    assert not NOT_FOR_LEARNERS & set(reqs), "build and test tools do not belong on Binder"
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for dep in deps:  # course_lib's own dependencies are pinned, not left to float
        assert _canon(Requirement(dep).name) in reqs, f"{dep} (pyproject.toml) is not pinned"
    for name in PROVIDED_BY_REPO2DOCKER:
        assert reqs[name].specifier, f"{name}: give at least the major version"


def _resolves(host: str) -> bool:
    try:
        socket.getaddrinfo(host, 443)
        return True
    except OSError:
        return False


@pytest.mark.slow
def test_binder_requirements_resolve_in_a_fresh_venv(tmp_path):
    """`pip install --dry-run -r binder/requirements.txt` in a new venv, from the repository
    root as repo2docker runs it (so '.' is the root). Where download.pytorch.org cannot be
    reached (as on the course's machines), its line is dropped and pip finds the same
    torch==2.13.0+cpu among its local wheels (find-links); elsewhere the file is used as is."""
    venv = tmp_path / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True)
    if made.returncode != 0:
        reason = f"cannot create a venv: {made.stderr.strip()[-300:]}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    requirements = BINDER / "requirements.txt"
    if not _resolves("download.pytorch.org"):
        text = requirements.read_text().replace(f"--extra-index-url {CPU_INDEX}\n", "")
        requirements = tmp_path / "requirements.txt"
        requirements.write_text(text)
    report = tmp_path / "report.json"
    run = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--quiet",
            "--report",
            str(report),
            "-r",
            str(requirements),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    installed = {_canon(item["metadata"]["name"]): item for item in json.loads(report.read_text())["install"]}
    assert installed["torch"]["metadata"]["version"] == "2.13.0+cpu"
    assert not [n for n in installed if n.startswith("nvidia-")], "a CUDA dependency crept in"
    course_lib = installed["course-lib"]["download_info"]["url"]
    assert course_lib.rstrip("/") == ROOT.as_uri()  # '.' is the repository root
    root = _root_pins()
    _, reqs, _ = _binder()
    for name in reqs:
        if name in root and name != "torch":
            assert installed[name]["metadata"]["version"] == root[name], name
    major = Version(installed["jupyterlab"]["metadata"]["version"]).major
    assert major == 4
