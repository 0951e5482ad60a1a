"""References stay with the grader (issue 24): the checks a learner runs compare with data; the
references that wrote it live in coursekit/grading, which the learner's package does not carry.

* the committed data is what the references write now (regenerated here and compared);
* the wheel that `pip install` builds from the repository (what the Colab set-up cell installs)
  holds no file of coursekit, and its checking package (course_lib/exercises) no line of any
  reference, typical mistake or shortcut. (Where an exercise asks the learner to rewrite a
  function of the chapter, e.g. ALiBi's bias, the chapter's own version is in course_lib, as it
  is on the page: the check refuses calls to it, see test_exercises_records.py.)
* the hidden tests catch a function that looks its answers up in the stored data.
"""

import ast
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from course_lib.exercises import REGISTRY, Answer, Check, ExerciseFailure
from course_lib.exercises._data import DATA_DIR, decode, read
from coursekit.grading import REFERENCES, check_data, hidden_cases
from coursekit.grading.data import data_names

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parent.parent
GRADER = ROOT / "coursekit" / "grading" / "checks"


@pytest.mark.parametrize("name", data_names())
def test_the_stored_data_is_what_the_references_write(name):
    """If this fails after a change to a reference, a case or a record's `call`: run
    `python -m coursekit.grading data NAME` and commit course_lib/exercises/data/NAME.pt."""
    assert check_data(name) == []


def test_every_check_and_answer_has_its_data_and_nothing_else_is_stored():
    stored = {p.stem for p in DATA_DIR.glob("*.pt")}
    assert stored == {n for n, r in REGISTRY.items() if isinstance(r, (Check, Answer))}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel pip builds from the repository's package files, copied first (building in
    place would leave build/ in the working tree)."""
    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("wheel")
    tracked = subprocess.run(
        ["git", "ls-files", "-z", "pyproject.toml", "README.md", "LICENSE", "course_lib"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for rel in filter(None, tracked.split("\0")):
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, src / rel)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            str(src),
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    (path,) = out.glob("course_lib-*.whl")
    return zipfile.ZipFile(path)


def _squash(line: str) -> str:
    return re.sub(r"\s+", "", line)


def _reference_lines() -> dict[str, str]:
    """{squashed line: where} for every line of code in the grader's check modules that says
    something (at least 30 characters without spaces; imports, docstrings and comments left out)."""
    lines = {}
    for path in sorted(GRADER.glob("*.py")):
        source = path.read_text()
        docstrings = set()
        for node in ast.walk(ast.parse(source)):
            body = getattr(node, "body", None)
            first = body[0] if isinstance(body, list) and body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                docstrings.update(range(first.lineno, first.end_lineno + 1))
        for n, line in enumerate(source.splitlines(), 1):
            code = line.split("#", 1)[0].strip()
            if n in docstrings or not code or code.startswith(("import ", "from ", '"', "'")):
                continue
            if len(_squash(code)) >= 30:
                lines[_squash(code)] = f"{path.relative_to(ROOT)}:{n}: {code}"
    return lines


# Lines the grader shares with given code of course_lib/exercises (an experiment's generator, the
# debugging exercises' suspects), which solve nothing.
BOILERPLATE = {
    _squash("g = torch.Generator().manual_seed(seed)"),
    _squash("return torch.ones(T, T, dtype=torch.bool)"),
    # the assignments (issue 36): signatures the statements fix, lines of the public measure
    # functions and stand-in models, and a generic loop; no line of a part's solution
    _squash("def forward(self, src, src_len, tgt_in):"),
    _squash("def decode(self, tgt_in, memory, src):"),
    _squash("return self.decode(tgt_in, self.encode(src), src)"),
    _squash("self.head.weight = self.wte.weight"),
    _squash("for group in optimizer.param_groups:"),
    _squash("for k, v in module.state_dict().items()"),
    _squash("with torch.random.fork_rng(devices=[]):"),
    _squash("logp = torch.log_softmax(logits.double(), -1)"),
}


def test_the_learners_package_carries_no_reference(wheel):
    names = wheel.namelist()
    assert any(n.startswith("course_lib/exercises/data/check_") for n in names), "the data is packaged"
    assert not [n for n in names if n.startswith("coursekit")]
    checking = [n for n in names if n.startswith("course_lib/exercises/") and n.endswith(".py")]
    packaged = _squash("\n".join(wheel.read(n).decode() for n in checking))
    references = _reference_lines()
    assert len(references) > 300, "the grader's modules were read"
    leaked = [where for line, where in references.items() if line in packaged and line not in BOILERPLATE]
    assert not leaked, "grader lines found in course_lib/exercises:\n" + "\n".join(leaked)


def test_the_packaged_checks_run_without_the_grader(wheel, tmp_path):
    """The wheel installed alone (no repository on the path): a check passes a right answer and
    names a typical mistake, from its data."""
    wheel.extractall(tmp_path / "site")
    script = (
        "import torch, sys\n"
        "from course_lib.exercises import check_padding_mask, ExerciseFailure\n"
        "assert 'coursekit' not in sys.modules\n"
        "check_padding_mask(lambda L, T: (torch.arange(T) < L[:, None])[:, None, None, :])\n"
        "try:\n"
        "    check_padding_mask(lambda L, T: (torch.arange(T) >= L[:, None])[:, None, None, :])\n"
        "except ExerciseFailure as e:\n"
        "    print('FAILED AS EXPECTED:', 'polarity is inverted' in str(e))\n"
    )
    run = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(tmp_path / 'site')!r})\n{script}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "✓ check_padding_mask: all 3 cases passed" in run.stdout
    assert "FAILED AS EXPECTED: True" in run.stdout


def test_a_lookup_of_the_stored_answers_passes_the_data_but_not_the_hidden_tests(capsys):
    """The data holds each case's inputs and expected output; hidden tests draw fresh cases."""
    stored = [(decode(c["args"]), decode(c["expected"])) for c in read("check_scaled_dot_score")["cases"]]

    def look_up(q, k):
        for (q0, k0), expected in stored:
            if q.shape == q0.shape and torch.equal(q, q0) and torch.equal(k, k0):
                return expected
        return torch.zeros(*q.shape[:-1], k.shape[-2])

    check = REGISTRY["check_scaled_dot_score"]
    assert check(look_up)
    with hidden_cases(), pytest.raises(ExerciseFailure, match="hidden case 1 of"):
        check(look_up)


@pytest.mark.parametrize("name", sorted(n for n, r in REFERENCES.items() if getattr(r, "hidden", None)))
def test_hidden_cases_differ_from_the_stored_ones(name):
    from coursekit.grading.references import make_cases

    stored = [c["description"] + repr(decode(c["args"])) for c in read(name)["cases"]]
    hidden = [c.description + repr(c.args) for c in make_cases(name, hidden=True)]
    assert not set(stored) & set(hidden)
