"""A toy chapter that follows every exercise convention of CONTRIBUTING.md: a function exercise
and a predict-then-measure exercise, with labels, stepped hints, solutions, checks and
explanations. The tests of ``coursekit.release`` (outline, nbgrader) build on it."""

from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

CAUSAL_STATEMENT = """## Exercises

````{exercise} The causal mask · ★ · core · 10 min
:label: ex-causal

Write `my_causal_mask(T)`: the `(T, T)` bool mask in which query $i$ may see key $j$.

```{admonition} Hint 1
:class: dropdown
Row $i$ is the query: which of its keys are in the past?
```

```{admonition} Hint 2
:class: dropdown
torch keeps one triangle of a matrix for you.
```
````"""

CAUSAL_SOLUTION = '''def my_causal_mask(T):
    """-> (T, T) bool, True where query i may attend to key j"""
    ### BEGIN SOLUTION
    ones = torch.ones(T, T, dtype=torch.bool)  # every pair, then keep the past
    return ones.tril()  # the lower triangle, with the diagonal
    ### END SOLUTION'''

SATURATION_STATEMENT = """````{exercise} When does the softmax saturate? · ★★ · core · 20 min
:label: ex-saturation

Without the $1/\\sqrt{d_k}$, at which $d_k$ does a typical query's largest weight over 16 keys
reach 0.9? Write your prediction in `predicted_dk` **before** you run the experiment.

```{admonition} Hint 1
:class: dropdown
How does the spread of $q \\cdot k$ grow with $d_k$?
```

```{admonition} Hint 2
:class: dropdown
A weight of 0.9 needs the best score well above the other fifteen.
```
````"""

PREDICTION = """predicted_dk = None  # your prediction (a number), before you run the next cell
### BEGIN SOLUTION
predicted_dk = 64
### END SOLUTION"""

EXPERIMENT = """from course_lib.exercises.attention import saturation_dk

measured_dk = saturation_dk()
print(f"with {n_keys} keys the largest weight reaches 0.9 at d_k = {measured_dk}")"""


def toy_chapter():
    """The toy chapter as a notebook (cells numbered as in the tests)."""
    cells = [
        new_markdown_cell("# A toy chapter\n\nIt follows every exercise convention."),  # 0
        new_code_cell("import sys", metadata={"tags": ["colab-setup"]}),  # 1
        new_code_cell("import math\n\nimport torch"),  # 2
        new_code_cell("demo = torch.ones(3).sum()\nprint(demo)"),  # 3: not needed by the exercises
        new_code_cell("n_keys = 16"),  # 4: needed by the experiment
        new_markdown_cell(CAUSAL_STATEMENT),  # 5
        new_code_cell(CAUSAL_SOLUTION, metadata={"tags": ["hide-input"]}),  # 6
        new_code_cell(
            "from course_lib.exercises import check_causal_mask\n\ncheck_causal_mask(my_causal_mask)"
        ),  # 7
        new_markdown_cell(
            "```{solution} ex-causal\n:class: dropdown\n\nThe lower triangle, "
            "with the diagonal: the past and the present.\n```"
        ),  # 8
        new_markdown_cell(SATURATION_STATEMENT),  # 9
        new_code_cell(PREDICTION),  # 10
        new_code_cell(EXPERIMENT),  # 11
        new_code_cell(
            "from course_lib.exercises import check_saturation_prediction\n\n"
            "check_saturation_prediction(predicted_dk, measured_dk)"
        ),  # 12
        new_markdown_cell(
            "```{solution} ex-saturation\n:class: dropdown\n\nThe spread of the "
            "scores grows like $\\sqrt{d_k}$.\n```"
        ),  # 13
        new_markdown_cell("## Check your understanding\n\n1. Why scale?"),  # 14
    ]
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb
