# The two commands of the README: `make book` and `make test`.
# Both create the virtual environment (.venv) and the site's JavaScript assets
# (node_modules) when they are missing or out of date.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY_OK  := $(VENV)/.installed
JS_OK  := node_modules/.installed

.PHONY: setup book test test-fast site-test student student-book bench clean

setup: $(PY_OK) $(JS_OK)

$(PY_OK): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3" >/dev/null
	touch $@

$(JS_OK): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# Build the site into _build/html: every notebook executed afresh, warnings are errors.
book: setup
	$(BIN)/jupyter-book build --all -W --keep-going .

# Every test: unit, torch parity, widgets, exercises, release, every notebook
# (nbval), then the built site in headless Chromium.
test: book
	$(BIN)/python -m pytest

# Tests without the notebooks and the browser (seconds).
test-fast: setup
	$(BIN)/python -m pytest tests -m "not site and not slow"

# The student edition (solutions stripped, instructor pages left out; rewritten on
# every run) and its site in _student/_build/html.
student: setup
	$(BIN)/python -m course_lib.release student _student --force

student-book: student
	cd _student && ../$(BIN)/jupyter-book build --all -W --keep-going .

bench: setup
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf _build _student .pytest_cache
