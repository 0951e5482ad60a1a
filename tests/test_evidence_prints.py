"""Asserts print the values they compare; nothing prints a boolean as proof (rules:
tests/evidence_scan.py). Checked on the chapters' code and stored outputs."""

import pytest
from evidence_scan import CHAPTERS, notebook_print_hits, printed_booleans, runs_assert, shows_a_number


@pytest.mark.parametrize("notebook", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_no_printed_booleans(notebook):
    hits = [h for h in notebook_print_hits(notebook) if h.kind == "print-bool"]
    assert not hits, (
        f"{notebook.name} prints booleans as evidence: assert the comparison and print the "
        f"numbers compared (e.g. the max difference, both values):\n" + "\n".join(map(str, hits))
    )


@pytest.mark.parametrize("notebook", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_asserting_cells_show_their_values(notebook):
    hits = [h for h in notebook_print_hits(notebook) if h.kind == "silent-assert"]
    assert not hits, (
        f"{notebook.name} has cells that assert without printing the values compared "
        f"(in their stored outputs):\n" + "\n".join(map(str, hits))
    )


@pytest.mark.parametrize(
    "code",
    [
        'print("parity:", True)',
        'print(f"smaller: {a < b}")',
        'print(f"equal: {torch.allclose(x, y, atol=1e-6)}")',
        "print(torch.allclose(x, y))",
        'print("zeros =", bool((out == 0).all()))',
        'print("nan:", out.isnan().any())',
        'print("ok: " + str(a == b))',
        'print("ok: {}".format(a <= b))',
        'print("both", (a > 0, b > 0))',
        'print("not:", not done)',
        "torch.allclose(x, y)",
        "x = 1\nx == 2",
        '%time y = 1\nprint("fine", True)',
    ],
)
def test_printed_booleans_are_flagged(code):
    assert printed_booleans(code)


@pytest.mark.parametrize(
    "code",
    [
        'print(f"max |ours - torch| = {(a - b).abs().max():.2e}")',
        'print("exact match", em, "vs", baseline)',
        "print(sum(a == b))",
        'print(f"{name:>6} -> {x:.3f}")',
        "assert torch.allclose(x, y)",
        "def check():\n    return torch.allclose(x, y)\ncheck_value = check()",
        'print("a", x)\ny = a < b',
    ],
)
def test_numbers_and_plain_asserts_are_not_flagged(code):
    assert not printed_booleans(code)


def test_runs_assert_ignores_asserts_inside_definitions():
    assert runs_assert("for x in xs:\n    assert x > 0")
    assert not runs_assert("def f(x):\n    assert x > 0\n    return x")
    assert not runs_assert("class A:\n    def f(self):\n        assert True")


def stdout(text):
    return {"output_type": "stream", "name": "stdout", "text": text}


@pytest.mark.parametrize(
    "outputs, expected",
    [
        ([stdout("max difference 3.1e-07\n")], True),
        ([stdout("hand-made == torch: True\n")], False),  # no value shown
        ([{"output_type": "stream", "name": "stderr", "text": "100%|####| 300/300"}], False),  # tqdm
        (
            [
                {
                    "output_type": "display_data",
                    "data": {"image/png": "...", "text/plain": "<Figure size 640x480>"},
                }
            ],
            False,
        ),
        ([{"output_type": "execute_result", "data": {"text/plain": "tensor([0.5, 0.2])"}}], True),
        ([], False),
    ],
)
def test_shows_a_number_reads_text_outputs_only(outputs, expected):
    assert shows_a_number(outputs) is expected
