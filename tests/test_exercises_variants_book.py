"""The book's two Answer exercises in a private variant (issue 36): ``ex-adding-1997`` (chapter 1)
and ``ex-reach-bias`` (chapter 2) ask for a number that follows from their statements, so a
variant changes the statements' numbers (``course_lib.exercises._variant.CHOICES``, written into
the statement by ``coursekit.grading.variants.vary_statements``) and the references compute the
answer from them.

Checked here: the book's statements hold the published sentences word for word (the published
edition is unchanged) and the published parameters give the published answers (1/48, 1.75);
every choice a variant can draw gives an answer that the published answer cannot pass and that
no typical mistake gives; a course written with ``--variant`` states other numbers, its
exercise cells (the notebook's own code) compute the variant's answer, which its check accepts,
visible and hidden, and the published number is refused.
"""

import copy
import os
import re
from pathlib import Path

import nbformat
import pytest

from course_lib.exercises import REGISTRY, ExerciseFailure
from course_lib.exercises import _variant as variant
from coursekit.grading import REFERENCES
from coursekit.grading.checks import lstm as lstm_refs
from coursekit.grading.checks import rnn as rnn_refs
from coursekit.grading.variants import SECRET_ENV, statement_text, vary_statements, visible_seed
from coursekit.release.nbgrader import write_course

REPO = Path(__file__).resolve().parent.parent
SECRET = "a private phrase for the test cohort"
EXERCISES = {  # label: (chapter, check, the variable the learner fills, published answer)
    "ex-adding-1997": ("01", "check_adding_1997_baseline", "one_value_mse_1997", 1 / 48),
    "ex-reach-bias": ("02", "check_reach_bias", "my_bias", 1.75),
}


def chapter(number: str):
    return nbformat.read(next((REPO / "book").glob(f"{number}_*.ipynb")), as_version=4)


def cell(nb, grade_id: str):
    (found,) = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id]
    return found


def loose(text: str) -> str:
    return " ".join(text.split())


def refused(check, number) -> bool:
    try:
        check(number)
    except ExerciseFailure:
        return True
    return False


# ---- the published edition ---------------------------------------------------------------
@pytest.mark.parametrize("exercise", sorted(EXERCISES))
def test_the_book_states_the_published_numbers_word_for_word(exercise, monkeypatch):
    monkeypatch.delenv(variant.ENV, raising=False)
    assert variant.variant_seed() == 0
    assert variant.variant_params(exercise) == variant.PUBLISHED_PARAMS[exercise]
    statement = loose(cell(chapter(EXERCISES[exercise][0]), f"{exercise}-statement").source)
    for sentence in statement_text(exercise):
        assert statement.count(loose(sentence)) == 1, sentence


@pytest.mark.parametrize("exercise", sorted(EXERCISES))
def test_the_published_parameters_give_the_published_answer(exercise, monkeypatch):
    monkeypatch.delenv(variant.ENV, raising=False)
    _, check, _, answer = EXERCISES[exercise]
    assert REFERENCES[check].value() == pytest.approx(answer, rel=1e-12)


# ---- every choice a variant can draw -------------------------------------------------------
@pytest.mark.parametrize("params", variant.CHOICES["ex-adding-1997"], ids=str)
def test_each_choice_of_the_adding_problem_refuses_the_published_answer(params, monkeypatch):
    monkeypatch.setattr(rnn_refs, "variant_params", lambda _: params)
    ref, tolerance = REFERENCES["check_adding_1997_baseline"], 0.02 * 1.125  # refused beyond
    value = ref.value()
    assert abs(value - 1 / 48) > tolerance * value, "the published answer would pass"
    for mistake in ref.mistakes:
        assert abs(mistake() - value) > tolerance * value, "a mistake gives the right answer"


@pytest.mark.parametrize("params", variant.CHOICES["ex-reach-bias"], ids=str)
def test_each_choice_of_the_reach_refuses_the_published_answer_and_is_clear_of_its_threshold(params):
    steps, threshold = params
    right = lstm_refs.smallest_reaching_bias(params=params)
    assert abs(right - 1.75) >= 0.5, "the published answer (or a neighbour of it) would pass"
    for wrong in (
        lstm_refs.smallest_reaching_bias("forget_product", params=params),
        lstm_refs.smallest_reaching_bias(last_below=True, params=params),
    ):
        assert abs(wrong - right) >= 0.25, "a mistake gives the right answer"
    # not a near tie: a CPU's rounding cannot move the answer to a neighbouring bias
    assert lstm_refs._reach_at_start(right, "reach", steps) > 1.05 * threshold
    assert lstm_refs._reach_at_start(right - 0.25, "reach", steps) < threshold / 1.05


def test_the_choice_follows_the_secret():
    picks = {
        exercise: {variant.params_for(exercise, visible_seed(f"cohort {i}")) for i in range(40)}
        for exercise in EXERCISES
    }
    for exercise, seen in picks.items():
        assert len(seen) >= 4 and variant.PUBLISHED_PARAMS[exercise] not in seen
    with pytest.raises(ValueError, match="exercise must be one of"):
        variant.params_for("ex-unknown", 3)


def test_a_statement_that_drifted_from_its_template_is_named():
    nb = copy.deepcopy(chapter("02"))
    statement = cell(nb, "ex-reach-bias-statement")
    statement.source = statement.source.replace("steps=50", "steps=40")
    with pytest.raises(ValueError, match="ex-reach-bias: its statement holds the book's sentence 0 times"):
        vary_statements(nb, SECRET)


# ---- a course written for a variant --------------------------------------------------------
@pytest.fixture(scope="module")
def variant_course(tmp_path_factory):
    course = tmp_path_factory.mktemp("variant")
    sources = write_course(REPO, course, ["01", "02"], exercises_only_=True, variant=SECRET)
    return {s.parent.name[2:4]: s for s in sources}


@pytest.fixture
def in_variant(variant_course, monkeypatch):
    """Run as the variant's notebook does: in its folder, with its exercise_data/."""

    def enter(chapter_number: str):
        folder = variant_course[chapter_number].parent
        monkeypatch.chdir(folder)
        monkeypatch.delenv(variant.ENV, raising=False)
        assert variant.active().seed == visible_seed(SECRET)
        return nbformat.read(variant_course[chapter_number], as_version=4)

    return enter


def run_exercise(nb, exercise: str) -> dict:
    """Execute the exercise's solution cell (the instructor's code, as a student's that computes)
    and return its namespace."""
    from course_lib.widgets import gradient_reach

    namespace = {"gradient_reach": gradient_reach}
    exec(cell(nb, f"{exercise}-solution").source, namespace)
    return namespace


@pytest.mark.parametrize("exercise", sorted(EXERCISES))
def test_a_variant_states_other_numbers_and_accepts_only_its_own_answer(exercise, in_variant):
    number, check_name, variable, published = EXERCISES[exercise]
    nb = in_variant(number)
    params = variant.variant_params(exercise)
    assert params != variant.PUBLISHED_PARAMS[exercise]
    statement = loose(cell(nb, f"{exercise}-statement").source)
    for book, mine in zip(statement_text(exercise), statement_text(exercise, params)):
        assert loose(book) not in statement and loose(mine) in statement
    if exercise == "ex-reach-bias":
        assert re.search(rf"k = {params.steps}\$", statement) and f"steps={params.steps}" in statement

    answer = run_exercise(nb, exercise)[variable]  # the notebook's code reads variant_params
    assert abs(answer - published) > 0.05 * published
    check = REGISTRY[check_name]
    assert check(answer), "the variant's answer, computed, passes"
    assert refused(check, published), "the published number is refused"

    from coursekit.grading import hidden_cases

    os.environ[SECRET_ENV] = SECRET
    try:
        with hidden_cases():  # what nbgrader's autograde runs
            assert check(answer)
            assert refused(check, published)
    finally:
        del os.environ[SECRET_ENV]


@pytest.mark.parametrize("exercise", sorted(EXERCISES))
def test_the_published_notebook_code_gives_the_published_answer(exercise, monkeypatch):
    monkeypatch.delenv(variant.ENV, raising=False)
    number, check_name, variable, published = EXERCISES[exercise]
    answer = run_exercise(chapter(number), exercise)[variable]
    assert answer == pytest.approx(published, rel=1e-12)
    assert REGISTRY[check_name](answer)


# ---- through real nbgrader ---------------------------------------------------------------------
def exercise_only_book(root: Path) -> None:
    """A book of two pages holding only the two exercises (statement, code, check, solution) and
    the import the reach needs: fast to autograde."""
    (root / "book").mkdir(parents=True)
    for exercise, (number, *_) in EXERCISES.items():
        nb = chapter(number)
        cells = [
            nbformat.v4.new_code_cell("from course_lib.widgets import gradient_reach"),
            *(copy.deepcopy(cell(nb, f"{exercise}-{part}")) for part in ("statement", "solution", "check")),
        ]
        for c in cells:
            c.metadata.pop("nbgrader", None)
            if c.cell_type == "code":
                c.outputs, c.execution_count = [], None
        nbformat.write(nbformat.v4.new_notebook(cells=cells), root / "book" / f"{number}_{exercise}.ipynb")


@pytest.mark.slow
def test_round_trip_of_a_variant_through_nbgrader(tmp_path):
    """nbgrader --variant: the instructor's notebooks earn both points; a submission that types
    the published numbers earns none; the untouched student version none."""
    pytest.importorskip("nbgrader")
    from test_release_nbgrader import nbgrader_command, scores

    exercise_only_book(tmp_path / "src")
    course = tmp_path / "course"
    for source in write_course(tmp_path / "src", course, ["01", "02"], variant=SECRET):
        assignment = source.parent.name
        nbgrader_command(course, "generate_assignment", assignment)
        instructor = nbformat.read(source, as_version=4)
        release = nbformat.read(course / "release" / assignment / source.name, as_version=4)
        (exercise,) = [e for e in EXERCISES if f"{e}-check" in json_ids(instructor)]
        variable, published = EXERCISES[exercise][2], EXERCISES[exercise][3]
        mine = variant.params_for(exercise, visible_seed(SECRET))
        seen = loose(cell(release, f"{exercise}-statement").source)
        assert all(loose(sentence) in seen for sentence in statement_text(exercise, mine)), (
            "students see them"
        )
        copied = copy.deepcopy(release)
        solution = cell(copied, f"{exercise}-solution")
        solution.source, typed = re.subn(
            r"raise NotImplementedError\(.*\)", f"{variable} = {published!r}", solution.source
        )
        assert typed == 1, solution.source  # the stub, replaced by the published number
        for student, nb in [("instructor", instructor), ("untouched", release), ("copied", copied)]:
            (course / "submitted" / student / assignment).mkdir(parents=True)
            nbformat.write(nb, course / "submitted" / student / assignment / source.name)
        nbgrader_command(course, "autograde", assignment)
        full, maximum, _ = scores(course, assignment, "instructor")
        got = {s: scores(course, assignment, s)[0] for s in ("untouched", "copied")}
        print(f"{assignment} ({exercise}), variant: instructor {full}/{maximum}, {got}")
        assert maximum >= 1 and full == maximum and got == {"untouched": 0, "copied": 0}


def json_ids(nb) -> set:
    return {c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells}


@pytest.fixture(scope="module")
def answer_keys(tmp_path_factory):
    """The answer key written for the published edition and for a variant (`answer-key OUT
    [--variant SECRET]`)."""
    from coursekit.release.answer_key import write_answer_key

    published, private = tmp_path_factory.mktemp("key"), tmp_path_factory.mktemp("key_variant")
    write_answer_key(REPO, published, force=True)
    write_answer_key(REPO, private, variant=SECRET, force=True)
    return published, private


@pytest.mark.parametrize("exercise", sorted(EXERCISES))
def test_the_answer_key_of_a_variant_states_the_variants_numbers(exercise, answer_keys):
    """The instructor's key must ask what the students of that variant were asked."""
    number = EXERCISES[exercise][0]
    published, private = (
        nbformat.read(next((key / "book").glob(f"{number}_*.ipynb")), as_version=4) for key in answer_keys
    )
    params = variant.PUBLISHED_PARAMS[exercise]
    book, mine = (loose(cell(nb, f"{exercise}-statement").source) for nb in (published, private))
    print(exercise, "published key:", book[:160], "| variant key:", mine[:160])
    for sentence in statement_text(exercise, params):
        assert loose(sentence) in book and loose(sentence) not in mine
    assert (answer_keys[1] / "variant.json").is_file() and not (answer_keys[0] / "variant.json").exists()
