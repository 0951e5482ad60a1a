"""Commit a folder as the whole tree of a branch, on top of that branch's history.

    python tools/publish_branch.py DIR BRANCH [--remote origin] [--message TEXT]

Used by the publishing workflow for the editions' branches (``make editions`` writes the
folders). The new commit's tree is exactly DIR's files; its parent is the branch's last
commit (``REMOTE/BRANCH`` if the remote has it, else the local branch, else none), so the
branch keeps a history and a push needs no force. Nothing is committed when the tree is
unchanged. Only ``refs/heads/BRANCH`` moves: the working tree, the index and the checked-out
branch are left alone (a separate index file is used). Prints the commit.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def git(*args: str, env: dict | None = None, check: bool = True) -> str:
    run = subprocess.run(["git", *args], capture_output=True, text=True, env={**os.environ, **(env or {})})
    if check and run.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed: {run.stderr.strip()}")
    return run.stdout.strip() if run.returncode == 0 else ""


def parent_commit(branch: str, remote: str) -> str:
    for ref in (f"refs/remotes/{remote}/{branch}", f"refs/heads/{branch}"):
        sha = git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
        if sha:
            return sha
    return ""


def publish(folder: Path, branch: str, remote: str = "origin", message: str | None = None) -> str:
    folder = folder.resolve()
    if not folder.is_dir() or not any(folder.iterdir()):
        raise SystemExit(f"{folder} is missing or empty: run `make editions` first")
    git("check-ref-format", f"refs/heads/{branch}")
    if git("symbolic-ref", "--quiet", "HEAD", check=False) == f"refs/heads/{branch}":
        raise SystemExit(f"{branch} is checked out here: refusing to move it under the work tree")
    with tempfile.TemporaryDirectory() as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git_dir = git("rev-parse", "--absolute-git-dir")
        git(
            "-C",
            str(folder),
            f"--git-dir={git_dir}",
            f"--work-tree={folder}",
            "add",
            "--all",
            "--force",
            ".",
            env=env,
        )
        tree = git("write-tree", env=env)
    parent = parent_commit(branch, remote)
    if parent and git("rev-parse", f"{parent}^{{tree}}") == tree:
        print(f"{branch}: unchanged ({parent[:12]})")
        return parent
    source = git("rev-parse", "--short", "HEAD", check=False) or "a work tree"
    text = message or f"{branch}: written from {source} by tools/publish_branch.py"
    commit = git("commit-tree", tree, *(["-p", parent] if parent else []), "-m", text)
    git("update-ref", f"refs/heads/{branch}", commit, *([parent] if parent else []))
    print(f"{branch}: {commit[:12]} ({'on ' + parent[:12] if parent else 'first commit'})")
    return commit


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("branch")
    parser.add_argument("--remote", default="origin")
    parser.add_argument("--message")
    args = parser.parse_args(argv)
    publish(args.folder, args.branch, args.remote, args.message)
    return 0


if __name__ == "__main__":
    sys.exit(main())
