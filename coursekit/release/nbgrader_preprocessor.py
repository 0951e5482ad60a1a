"""The nbgrader preprocessor that makes nbgrader's student version our student edition.

nbgrader_config.py (written by ``python -m coursekit.release nbgrader``) runs it first in
``nbgrader generate_assignment``. It imports nbgrader, so only nbgrader's configuration imports
this module.
"""

from nbgrader.preprocessors import NbGraderPreprocessor

from .student import release_notebook


class StudentEdition(NbGraderPreprocessor):
    """Everything ``release_notebook`` does except replacing the solution regions (nbgrader's
    ClearSolutions does that next, with our stub): remove the sphinx-exercise solution
    directives and the cells tagged ``solution``, show the solution cells (no ``hide-input``),
    tag the cells that raise until solved ``raises-exception``."""

    def preprocess(self, nb, resources):
        name = resources.get("unique_key") or "notebook"
        release_notebook(nb, name, stub=False)
        return nb, resources
