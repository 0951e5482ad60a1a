"""The evidence protocol's checks on the chapters: numbers typed into prose, booleans printed as proof.

Used by tests/test_evidence_prose.py and tests/test_evidence_prints.py; CONTRIBUTING.md ("The
evidence protocol") states the rules for authors. Both checks read the notebooks as committed
(markdown sources, code sources and stored outputs); they execute nothing.

Typed numbers (markdown cells). The text that counts is the prose: math ($...$, $$...$$,
\\begin...\\end), inline code and roles ({glue:text}`key`, {numref}`...`), code blocks and code or
math directives, headings, (label)= lines, directive lines and their :option: lines, exercise
metadata lines (Difficulty/Importance/Time), HTML tags and comments, and link targets are left
out. In what is left, a hit is:
    decimal      2.13, 0.167, 1e-3, 2.13.0   (any number with a decimal point or an exponent)
    percent      56 %, 0.5%
    factor       3.2×, 4x, "twice as", "three times faster", "10-fold", "orders of magnitude"
    unit         a number with a measured unit: s, ms, µs, min, hours, bits, bpc, nats, K, M, B,
                 KB, MB, GB, parameters ("4 s", "84.6 K", "19 bits")
    about        an integer after about, around, roughly, approximately, nearly, almost, ~, ≈
                 ("from about 8 characters on": a number read off a figure)
    unshown      a claim about runs the page does not show ("in our runs", "while preparing
                 this chapter")
Plain integers are not hits: counts, sizes, steps, seeds, years, chapter numbers are definitions
or configuration ("the 10 input formats", "600 steps of 64 sequences"). A sentence that cites its
source (a name and a year: "(Vaswani et al., 2017)", "Press et al. 2022", "Hochreiter &
Schmidhuber, 1997") may quote the source's numbers. A deliberate, non-measured number elsewhere
is written as math ($0.9$) or listed in a marker in the same cell, an HTML comment that no reader
sees:  <!-- not measured: 0.5, 0.9, twice as (the gains set in the code above) -->
Every listed item must match a hit in the cell (a stale marker is itself a hit).

Printed booleans (code cells).
    print-bool   print() or a cell's last expression shows a boolean: a True/False literal, a
                 comparison, `not`, or a call of allclose / equal / isclose / all / any / bool /
                 isnan ... (also inside f-strings, str(), .format()). An assert with printed
                 values is the evidence; a printed True proves nothing, and outside CI a
                 regression would just print False.
    silent-assert  a cell that runs an assert (outside a def or class) has no text output with a
                 number in it (stdout, or a text result; figures, widgets and stderr do not count).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))


@dataclass(frozen=True)
class Hit:
    cell: int
    kind: str
    token: str
    context: str

    def __str__(self):
        return f"cell {self.cell}: {self.kind} {self.token!r} in “…{self.context}…”"


def cells(path):
    return json.loads(Path(path).read_text(encoding="utf-8"))["cells"]


def source(cell):
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


# ---------------------------------------------------------------------------
# Typed numbers in markdown
# ---------------------------------------------------------------------------

NUM = r"(?<![\w.])(?<![A-Za-z]-)(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)*(?:[eE][-+]?\d+)?(?![\w.]*\d|/)"
DECIMAL = r"(?<![\w.])(?<![A-Za-z]-)\d+(?:(?:\.\d+)+(?:[eE][-+]?\d+)?|[eE][-+]?\d+)(?!\w)"
UNITS = (
    r"ms|µs|μs|ns|s|sec|secs|seconds?|min|mins|minutes?|hours?|bits?|bpc|nats?|K|M|B|k|KB|kB|MB|GB|"
    r"MiB|GiB|parameters|params"
)
WORD_NUMBER = r"\w+|\d+(?:\.\d+)?"
HEDGES = r"about|around|roughly|approximately|nearly|almost"
COMPARATIVE = r"faster|slower|more|fewer|less|larger|smaller|higher|lower|bigger|longer|shorter|as"
PATTERNS = [  # (kind, regex); group "t" is the token a marker lists
    ("unshown", r"(?P<t>\bour (?:runs|experiments)\b|\bwhile preparing this (?:chapter|book)\b)"),
    ("percent", rf"(?P<t>{NUM})\s?%"),
    ("factor", rf"(?P<t>{NUM})\s?×(?!\s?(?:\d|[A-Za-z]\b|§))|(?P<t2>{NUM})x\b"),
    ("factor", rf"(?P<t>\b(?:twice|thrice|half|(?:{WORD_NUMBER}) times) (?:{COMPARATIVE})\b)"),
    ("factor", r"(?P<t>\b\w+-fold\b|\b(?:an |two |three |\w+ )?orders? of magnitude\b)"),
    ("unit", rf"(?P<t>{NUM})\s?(?:{UNITS})(?![\w/-])"),
    ("decimal", rf"(?P<t>{DECIMAL})"),
    ("about", rf"(?:\b(?:{HEDGES})\s+|[~≈]\s?)(?P<t>{NUM})"),
]
CITATION = re.compile(
    r"(?:\bet al\.?|\b(?!(?:In|By|Since|From|Until|After|Before|Around|On|At|Of|For|The)\b)"
    r"[A-Z][A-Za-z'’\-]+)(?:,|\s)\s*\(?(?:19|20)\d\d[a-z]?\b"
)
MARKER = re.compile(r"<!--\s*not measured:(.*?)-->", re.DOTALL)
CODE_DIRECTIVES = {
    "code",
    "code-block",
    "code-cell",
    "sourcecode",
    "literalinclude",
    "math",
    "raw",
    "glue",
    "glue:any",
    "glue:figure",
    "glue:math",
    "glue:md",
    "mermaid",
}
FENCE = re.compile(r"^\s*(`{3,}|~{3,}|:{3,})\s*(\{([^}]*)\})?(.*)$")
SKIP_LINE = re.compile(
    r"^\s*(#{1,6}\s|\(.+\)=\s*$|[*_]*(difficulty|importance|time)[*_]*\s*:)", re.IGNORECASE
)


def prose(markdown):
    """The prose of a markdown cell: what a reader reads as sentences (see the module docstring)."""
    text = re.sub(r"<!--.*?-->", " ", markdown, flags=re.DOTALL)
    kept, stack, options = [], [], False  # stack of (fence char, length, is_code)
    for line in text.splitlines():
        m = FENCE.match(line)
        if (
            m
            and stack
            and m.group(1)[0] == stack[-1][0]
            and len(m.group(1)) >= stack[-1][1]
            and not m.group(2)
            and not m.group(4).strip()
        ):
            stack.pop()  # a closing fence
            continue
        if stack and stack[-1][2]:
            continue  # inside code or math
        if m:
            name = (m.group(3) or "").strip()
            stack.append((m.group(1)[0], len(m.group(1)), not name or name in CODE_DIRECTIVES))
            options = True
            continue
        if options and re.match(r"^\s*:[\w-]+:", line):
            continue  # a directive's :option: lines
        options = False
        if not SKIP_LINE.match(line):
            kept.append(line)
    text = "\n".join(kept)
    # a measured number dressed as math is still one: $16\times$, $50\%$, "roughly $10^{4}$"
    text = re.sub(r"\$\s*(\d[\d.,]*)\s*(?:\\times|×)\s*\$", r"\1×", text)
    text = re.sub(r"\$\s*(\d[\d.,]*)\s*\\?%\s*\$", r"\1%", text)
    text = re.sub(rf"\b({HEDGES})\s+\$\s*(\d[^$\n]*)\$", r"\1 \2", text)
    text = re.sub(r"\$\$.*?\$\$|\\begin\{(\w+\*?)\}.*?\\end\{\1\}", " § ", text, flags=re.DOTALL)
    text = re.sub(r"(?<!\\)\$[^$\n]+?(?<!\\)\$", " § ", text)  # math becomes §
    text = re.sub(r"(\{[\w:.-]+\})?(`+).+?\2", " ", text, flags=re.DOTALL)  # inline code and roles
    text = re.sub(r"\]\([^)]*\)", "]", text)  # link targets
    return re.sub(r"<[^>\n]+>", " ", text)  # HTML tags, autolinks


def sentences(text):
    """Sentences of prose: paragraphs, list items and table rows are split first."""
    blocks = re.split(r"\n\s*\n|\n(?=\s*(?:[-*+]|\d+\.)\s)|\n(?=\s*\|)", text)
    out = []
    for block in blocks:
        block = " ".join(block.split())
        start = 0
        for m in re.finditer(r"[.!?]\s+(?=[A-Z*_\"“])", block):
            before = block[: m.start() + 1]
            if re.search(r"(\bet al|\be\.g|\bi\.e|\bvs|\bcf|\bFig|\bEq|\b[A-Z])\.$", before):
                continue
            out.append(block[start : m.end()])
            start = m.end()
        out.append(block[start:])
    return [s for s in out if s.strip()]


def _hits_in(sentence):
    found, taken = [], []
    for kind, pattern in PATTERNS:
        for m in re.finditer(pattern, sentence):
            group = "t" if m.group("t") is not None else "t2"
            span = m.span(group)
            if any(a < span[1] and span[0] < b for a, b in taken):
                continue  # one hit per number
            taken.append(span)
            found.append((span[0], kind, m.group(group), sentence[max(0, span[0] - 40) : span[1] + 40]))
    return [hit[1:] for hit in sorted(found)]  # in reading order


def typed_numbers(markdown, cell=0):
    """Hits in one markdown cell, after its marker's exemptions; a stale marker item is a hit."""
    listed = [
        item.strip()
        for m in MARKER.finditer(markdown)
        for item in re.sub(r"\(.*?\)", "", m.group(1), flags=re.DOTALL).split(",")
        if item.strip()
    ]
    hits, used = [], set()
    for sentence in sentences(prose(markdown)):
        if CITATION.search(sentence):
            continue  # a literature number with its source
        for kind, token, context in _hits_in(sentence):
            if token in listed:
                used.add(token)
            else:
                hits.append(Hit(cell, kind, token, context))
    hits += [
        Hit(cell, "stale-marker", item, "listed in <!-- not measured: … --> but not found in the cell")
        for item in listed
        if item not in used
    ]
    return hits


def notebook_typed_numbers(path):
    return [
        h
        for i, c in enumerate(cells(path))
        if c["cell_type"] == "markdown"
        for h in typed_numbers(source(c), i)
    ]


GLUE_ROLE = re.compile(r"\{glue(?::\w+)?\}`([^`]+)`")


def glue_references(markdown):
    """Keys used by {glue}/{glue:text}/... roles, without a :format suffix ('path::key' kept)."""
    keys = []
    for ref in GLUE_ROLE.findall(markdown):
        doc, sep, key = ref.rpartition("::")
        keys.append(f"{doc}{sep}{key.split(':')[0]}")
    return keys


def glued_keys(path):
    """Keys glued in a notebook's stored outputs (myst-nb's `scrapbook` output metadata)."""
    return {
        o["metadata"]["scrapbook"]["name"]
        for c in cells(path)
        if c["cell_type"] == "code"
        for o in c.get("outputs", [])
        if "scrapbook" in o.get("metadata", {})
    }


# ---------------------------------------------------------------------------
# Printed booleans and silent asserts in code cells
# ---------------------------------------------------------------------------

BOOL_CALLS = {
    "allclose",
    "equal",
    "array_equal",
    "array_equiv",
    "isclose",
    "all",
    "any",
    "bool",
    "isinstance",
    "issubclass",
    "isnan",
    "isinf",
    "isfinite",
    "is_tensor",
    "hasattr",
}


def parse(code):
    """The cell's AST, with IPython magics and shell lines blanked."""
    lines = [re.sub(r"^(\s*)[%!].*$", r"\1pass", line) for line in code.splitlines()]
    return ast.parse("\n".join(lines))


def is_boolean(node):
    """True if the expression shows a boolean: True/False, a comparison, `not`, a boolean call,
    or one of these inside an f-string, str()/repr(), .format(), string + or %, or a tuple."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, bool)
    if isinstance(node, (ast.Compare, ast.BoolOp)) or (
        isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)
    ):
        return True
    if isinstance(node, ast.JoinedStr):
        return any(is_boolean(v.value) for v in node.values if isinstance(v, ast.FormattedValue))
    if isinstance(node, (ast.Tuple, ast.List)):
        return any(is_boolean(e) for e in node.elts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        return is_boolean(node.left) or is_boolean(node.right)
    if isinstance(node, ast.Call):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        if name in BOOL_CALLS:
            return True
        if name in {"str", "repr", "format"}:
            return any(is_boolean(a) for a in node.args)
    return False


def printed_booleans(code):
    """(line, snippet) of every print() argument or last expression that shows a boolean."""
    tree = parse(code)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "print":
            found += [(node.lineno, ast.unparse(node)) for a in node.args if is_boolean(a)][:1]
    if tree.body and isinstance(tree.body[-1], ast.Expr) and is_boolean(tree.body[-1].value):
        found.append((tree.body[-1].lineno, ast.unparse(tree.body[-1])))
    return sorted(found)


def runs_assert(code):
    """True if the cell itself runs an assert (one inside a def, lambda or class does not count)."""

    def visit(node):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return False
        return any(visit(child) for child in ast.iter_child_nodes(node))

    return visit(parse(code))


def shows_a_number(outputs):
    """True if a text output (stdout, or a text result that is not a figure's or a widget's) has a digit."""
    for o in outputs:
        if o["output_type"] == "stream" and o.get("name") == "stdout":
            text = o["text"]
        elif o["output_type"] in ("execute_result", "display_data"):
            data = o.get("data", {})
            if any(k.startswith("image/") or "widget" in k for k in data):
                continue
            text = data.get("text/plain", "")
        else:
            continue
        if re.search(r"\d", "".join(text) if isinstance(text, list) else text):
            return True
    return False


def notebook_print_hits(path):
    """Hits of both code checks in one notebook."""
    hits = []
    for i, c in enumerate(cells(path)):
        if c["cell_type"] != "code" or "raises-exception" in c.get("metadata", {}).get("tags", []):
            continue
        code = source(c)
        hits += [
            Hit(i, "print-bool", f"line {line}", snippet[:100]) for line, snippet in printed_booleans(code)
        ]
        if runs_assert(code) and not shows_a_number(c.get("outputs", [])):
            first = next(line for line in code.splitlines() if "assert" in line).strip()
            hits.append(Hit(i, "silent-assert", "no values printed", first[:100]))
    return hits
