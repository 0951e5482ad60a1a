"""The repository's own documents cite only what exists.

README.md, CONTRIBUTING.md and ARCHITECTURE.md are read for what they name, and each name is
looked up in the repository (its files as git lists them: committed, or new and not ignored):

* paths under the repository's folders (`course_lib/...`, `coursekit/...`, `benchmarks/...`,
  `tests/...`, `tools/...`, `_ext/...`, `book/...`, `binder/...`, `.github/...`, `.ci/...`), in
  prose or code; a path with a placeholder (`<topic>`, `NN`, `*`) must match at least one file;
* file names in inline code (`Makefile`, `kernels.env`, `DESIGN.md`): a file at the root, or the
  name of a file somewhere in the repository;
* dotted names `course_lib.x.y`, `coursekit.x.y`, `benchmarks.x.y`, `tools.x.y`, and
  `module:qualname`: the module must exist and define the name (course_lib and coursekit are
  imported; benchmarks and tools, scripts that set up their process when imported, are read);
  also the names of `from course_lib... import a, b` lines in code blocks;
* `make <target>` in code: a target of the Makefile;
* sweeps named in prose ("the sweep `adding_rnn`", "sweeps `a`, `b` and `c`") or loaded in code
  (`load_sweep("x")`): committed in course_lib/sweeps/ or registered in a benchmarks/bench_*.py;
* links to files and to headings (`#the-evidence-protocol`): the file and the heading exist.

The last test plants one wrong reference of each kind and checks that each is reported.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ["README.md", "CONTRIBUTING.md", "ARCHITECTURE.md"]
FOLDERS = r"course_lib|coursekit|benchmarks|tests|tools|_ext|book|binder|\.github|\.ci"
IMPORTED = ("course_lib", "coursekit")  # dotted names under these are imported; others are read

PATH = re.compile(rf"(?<![\w./-])((?:{FOLDERS})/(?:[\w./*-]|<[^>\n]+>)*)")
FILE_NAME = re.compile(r"^(?:Makefile|LICENSE|[\w.-]+\.(?:md|yml|yaml|toml|txt|py|env|json|cfg|ini|js|css))$")
DOTTED = re.compile(
    r"(?<![\w./-])((?:course_lib|coursekit|benchmarks|tools)(?:\.[A-Za-z_]\w*)+)(?::([A-Za-z_][\w.]*))?(?![\w*])"
)
FROM_IMPORT = re.compile(
    r"^[ \t]*from[ \t]+((?:course_lib|coursekit)[\w.]*)[ \t]+import[ \t]+(?:\(([\w,\s]+)\)|([\w, \t]+))", re.M
)
MAKE = re.compile(r"^[ \t]*make[ \t]+(?:-\S+[ \t]+)*([a-z][\w-]*)", re.M)  # a command line that runs make
SWEEP_PROSE = re.compile(r"\bsweeps?\s+((?:`[\w*]+`(?:,\s*|\s+and\s+|\s+or\s+)?)+)")
LOAD_SWEEP = re.compile(r"load_sweep\(\s*[\"'](\w+)[\"']")
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(`{3,}|~{3,})[^\n]*\n(.*?)^\1\s*$", re.M | re.S)
SPAN = re.compile(r"(`+)(.+?)\1", re.S)


@cache
def repository_files() -> frozenset[str]:
    """The repository's files: committed, or new and not ignored (what a commit would hold)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return frozenset(f for f in listed.split("\0") if f and (ROOT / f).exists())


@cache
def repository_dirs() -> frozenset[str]:
    parents = {str(parent) for f in repository_files() for parent in Path(f).parents}
    return frozenset(parents - {"."})


@cache
def makefile_targets() -> frozenset[str]:
    text = (ROOT / "Makefile").read_text()
    return frozenset(re.findall(r"^([\w.-]+)\s*:(?!=)", text, re.M))


@cache
def sweep_names() -> frozenset[str]:
    committed = {p.stem for p in (ROOT / "course_lib" / "sweeps").glob("*.json")}
    registered = set()
    for bench in (ROOT / "benchmarks").glob("bench_*.py"):
        registered |= set(re.findall(r"[\"'](\w+)[\"']\s*:\s*SweepSpec\(", bench.read_text()))
    return frozenset(committed | registered)


def code_of(text: str) -> str:
    """The code of a Markdown text: its fenced blocks and its inline code spans."""
    blocks = [m.group(2) for m in FENCE.finditer(text)]
    rest = FENCE.sub("", text)
    return "\n".join(blocks + [m.group(2) for m in SPAN.finditer(rest)])


def spans_of(text: str) -> list[str]:
    """The inline code spans of a Markdown text (outside fenced blocks)."""
    return [m.group(2).strip() for m in SPAN.finditer(FENCE.sub("", text))]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"`|\*\*?|_(?=\w)|(?<=\w)_", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    return {slug(h) for h in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", FENCE.sub("", text), re.M)}


# --- each kind of reference ---------------------------------------------------------------


def path_problem(path: str) -> str | None:
    path = path.rstrip(".,;:)")
    if path.rstrip("/") in repository_files() | repository_dirs():
        return None
    if any(mark in path for mark in ("<", "*")) or re.search(r"(?<![A-Za-z])NN(?![A-Za-z])", path):
        pattern = re.sub(r"<[^>]*>", "*", path.rstrip("/"))
        pattern = re.sub(r"(?<![A-Za-z])NN(?![A-Za-z])", "[0-9][0-9]", pattern)
        regex = re.compile(re.escape(pattern).replace(r"\*", "[^/]*").replace(r"\[0\-9\]", "[0-9]"))
        if any(regex.fullmatch(f) for f in repository_files() | repository_dirs()):
            return None
        return f"{path}: no file matches"
    return f"{path}: no such file or folder"


def file_name_problem(name: str) -> str | None:
    if name in repository_files() or any(Path(f).name == name for f in repository_files()):
        return None
    return f"{name}: no such file in the repository"


def _module_file(parts: list[str]) -> Path | None:
    base = ROOT.joinpath(*parts)
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


def _defines(body: list[ast.stmt], name: str) -> ast.AST | None:
    """The top-level statement of `body` that defines `name` (def, class, assignment, import)."""
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == name:
            return node
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return node
        if isinstance(node, ast.Import | ast.ImportFrom) and any(
            (alias.asname or alias.name.split(".")[0]) == name for alias in node.names
        ):
            return node
    return None


def dotted_problem(name: str, qualname: str | None = None) -> str | None:
    cited = name + (f":{qualname}" if qualname else "")
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        if _module_file(parts[:i]) is not None:
            module, rest = parts[:i], parts[i:] + (qualname.split(".") if qualname else [])
            break
    else:
        return f"{cited}: no such module"
    if not rest:
        return None
    if module[0] in IMPORTED:
        try:
            obj = importlib.import_module(".".join(module))
        except Exception as error:  # the doc cites it, so it must import
            return f"{cited}: {'.'.join(module)} does not import ({error!r})"
        for attr in rest:
            if not hasattr(obj, attr):
                return f"{cited}: {'.'.join(module)} has no {'.'.join(rest)}"
            obj = getattr(obj, attr)
        return None
    body = ast.parse(_module_file(module).read_text(encoding="utf-8")).body
    for attr in rest:
        node = _defines(body, attr)
        if node is None:
            return f"{cited}: {'.'.join(module)} has no {'.'.join(rest)}"
        body = node.body if isinstance(node, ast.ClassDef) else []
    return None


def problems(text: str) -> list[str]:
    """Every reference of a Markdown text that names nothing in the repository."""
    found = []
    code, spans = code_of(text), spans_of(text)
    for match in PATH.finditer(text):
        found.append(path_problem(match.group(1)))
    for span in spans:
        if FILE_NAME.match(span):
            found.append(file_name_problem(span))
    for match in DOTTED.finditer(text):
        found.append(dotted_problem(match.group(1), match.group(2)))
    for module, in_parentheses, on_the_line in FROM_IMPORT.findall(code):
        names = in_parentheses or on_the_line
        found += [dotted_problem(f"{module}.{n.strip()}") for n in names.split(",") if n.strip()]
    for target in MAKE.findall(code):
        if target not in makefile_targets():
            found.append(f"make {target}: no such target in the Makefile")
    cited_sweeps = [n for group in SWEEP_PROSE.findall(text) for n in re.findall(r"`([\w*]+)`", group)]
    for name in cited_sweeps + LOAD_SWEEP.findall(code):
        regex = re.compile(re.escape(name).replace(r"\*", r"\w*"))
        if not any(regex.fullmatch(s) for s in sweep_names()):
            found.append(f"sweep {name}: neither committed (course_lib/sweeps/) nor registered (benchmarks/)")
    for target in (m.group(1) for m in LINK.finditer(text)):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        if file and not (ROOT / file).exists():
            if not PATH.fullmatch(file):  # a path under a folder is reported above
                found.append(f"link {target}: no such file")
        elif anchor:
            page = (ROOT / file).read_text(encoding="utf-8") if file else text
            if anchor not in anchors(page):
                found.append(f"link {target}: no such heading")
    return [p for p in found if p]


# --- the documents -------------------------------------------------------------------------


@pytest.mark.parametrize("doc", DOCS)
def test_every_reference_of_the_document_exists(doc):
    text = (ROOT / doc).read_text(encoding="utf-8")
    assert not problems(text), f"{doc} cites what does not exist:\n" + "\n".join(problems(text))


@pytest.mark.parametrize("doc", DOCS)
def test_the_document_cites_the_repository(doc):
    """The checks above have something to check: each document names files and code."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    assert len(PATH.findall(text)) >= 3, PATH.findall(text)
    assert DOTTED.search(text) or FROM_IMPORT.search(text), f"{doc} names no module"


def test_planted_wrong_references_are_each_reported():
    real = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    planted = {
        "`course_lib/no_such_module.py`": "course_lib/no_such_module.py: no such file",
        "tests/test_unit_nothing.py": "tests/test_unit_nothing.py: no such file",
        "`book/NN_<slug>.md`": "book/NN_<slug>.md: no file matches",
        "the architecture is in `DESIGN.md`": "DESIGN.md: no such file",
        "`course_lib.pages.evidence.assert_within`": (
            "course_lib.pages.evidence.assert_within: course_lib.pages.evidence has"
        ),
        "`course_lib.no_such_module`": "course_lib.no_such_module: course_lib has no no_such_module",
        "`tools.no_such_tool`": "tools.no_such_tool: no such module",
        "`course_lib.gpt:GPT.no_such_method`": "course_lib.gpt:GPT.no_such_method: course_lib.gpt has no",
        "`benchmarks.sweep.no_such_function`": "benchmarks.sweep.no_such_function: benchmarks.sweep has no",
        "```python\nfrom course_lib.pages.sweeps import load_sweep, no_such_helper\n```": (
            "course_lib.pages.sweeps.no_such_helper: course_lib.pages.sweeps has no"
        ),
        "run `make no-such-target`": "make no-such-target: no such target",
        "the sweep `charlm_heldout_bpc`": "sweep charlm_heldout_bpc: neither committed",
        'load_sweep("no_such_sweep")': None,  # prose, not code: not read
        '```python\nsweep = load_sweep("no_such_sweep")\n```': "sweep no_such_sweep: neither committed",
        "[the guide](book/no_such_guide.md)": "book/no_such_guide.md: no such file",
        "[the notes](NOTES.md)": "link NOTES.md: no such file",
        "[the lock](binder/requirements.txt)": None,
        "[the lock](requirements.txt)": None,
        "[the rules](#no-such-heading)": "link #no-such-heading: no such heading",
        "[the protocol](CONTRIBUTING.md#no-such-section)": "link CONTRIBUTING.md#no-such-section: no such",
    }
    assert not problems(real), problems(real)
    for reference, expected in planted.items():
        reported = [p for p in problems(real + "\n\n" + reference + "\n") if p not in problems(real)]
        if expected is None:
            assert not reported, (reference, reported)
        else:
            assert len(reported) == 1 and reported[0].startswith(expected), (reference, reported)


def test_real_references_of_each_kind_pass():
    """The lookups accept what exists, in each form the documents use."""
    good = (
        "`course_lib/attention.py`, course_lib/widgets/, `tests/test_unit_<topic>.py`, "
        "`book/NN_*.ipynb`, `benchmarks/bench_<topic>.py`, `Makefile`, `kernels.env`, `explorer.js`, "
        "`course_lib.pages.sweeps.load_sweep`, `course_lib.gpt:GPT.forward`, `benchmarks.sweep.main`, "
        "`coursekit.release`, the sweep `adding_rnn`, sweeps `adding_rnn`, `adding_budget` and `adding_*`, "
        "[rules](CONTRIBUTING.md#the-evidence-protocol)\n\n"
        "```\nmake test\nmake -n test-fast\n```\n"
        "```python\nfrom course_lib.pages.sweeps import load_sweep, check_live\n"
        "load_sweep('adding_rnn')\n```\n"
    )
    assert problems(good) == []
