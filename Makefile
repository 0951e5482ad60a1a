# The two commands of the README: `make book` and `make test`.
# Both create the virtual environment (.venv) and the site's JavaScript assets
# (node_modules) when they are missing or out of date.
#
# Each notebook is executed twice per `make test`: once by tools/execute_book.py into
# _build/executed (the site, the student site and the PDF are built from that copy, with
# Jupyter Book's execution off), and once by nbval, which re-executes the student edition
# of every notebook and compares its checked outputs with the committed ones.

# The CPU kernels that the sweeps and the executed book are made with (kernels.env: why they
# are pinned). Every target runs with them; nbval's second execution of the notebooks runs with
# OTHER_KERNELS instead, as a learner's CPU would (other kernels must never make a page raise).
include kernels.env
export ATEN_CPU_CAPABILITY MKL_CBWR ONEDNN_MAX_CPU_ISA
OTHER_KERNELS ?= ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE ONEDNN_MAX_CPU_ISA=SSE41

PYTHON ?= python3
# The machine's cores (nproc, not lowered by an OpenMP setting; 2 where nproc is missing).
NPROC  := $(shell env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc 2>/dev/null || echo 2)
# Notebooks executed side by side (the chapters run torch on one thread), and jobs of make
# itself when `make test` builds the sites, the editions and the PDF: one per core.
JOBS   ?= $(NPROC)
# pytest workers: one more than the cores, as the browser, venv and kernel start-up tests wait
# on I/O part of the time.
TEST_JOBS ?= $(shell echo $$(( $(NPROC) + 1 )))
VENV   := .venv
BIN    := $(VENV)/bin
PY_OK  := $(VENV)/.installed
JS_OK  := node_modules/.installed
EXECUTED := _build/executed
GPT_ONNX := _build/gpt/gpt_capstone.onnx
STUDENT_SRC := _build/student
EDITIONS := _build/editions
JB_BUILD := $(BIN)/jupyter-book build --all -W --keep-going

.PHONY: setup executed book test test-inputs test-fast test-unit test-nbval-1 test-nbval-2 test-site \
        student student-book learner editions pdf lint bench clean gpt-onnx

setup: $(PY_OK) $(JS_OK) $(GPT_ONNX)

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

# Chapter 10's trained GPT as ONNX, for the explorer that runs it in the reader's browser: exported
# from the committed weights (course_lib/static/gpt_capstone.pt, tools/train_gpt_capstone.py), the
# same bytes every time. _ext/course_site.py serves it on the site.
gpt-onnx: $(GPT_ONNX)

$(GPT_ONNX): course_lib/static/gpt_capstone.pt tools/export_gpt_onnx.py course_lib/gpt.py $(PY_OK)
	$(BIN)/python tools/export_gpt_onnx.py --out $@

# Every notebook of _toc.yml executed once (JOBS side by side) into _build/executed, with
# its widget state; a notebook is executed again only when it, course_lib, benchmarks/ or
# the environment changed since (tools/execute_book.py --force executes them all).
executed: setup
	$(BIN)/python tools/execute_book.py --jobs $(JOBS) --out $(EXECUTED)

# The site in _build/html, built from the executed notebooks; warnings are errors.
book: executed
	$(JB_BUILD) --path-output . $(EXECUTED)

# pytest as `make test` and its shards run it. pytest-xdist hands each notebook or test module
# to one worker (loadscope). COURSE_LIB_THREADS=1 holds the notebooks that ask for more threads
# (set_threads(2)) to one: the workers share the cores. pytest runs on OTHER_KERNELS: nbval's
# execution of every notebook is the book on a second kernel set (the tests that need the pinned
# kernels start their own process).
PYTEST := $(OTHER_KERNELS) COURSE_LIB_THREADS=1 $(BIN)/python -m pytest -n $(TEST_JOBS) --dist loadscope

# Every test: unit, torch parity, widgets, exercises, release, config, the site, the
# student site and the PDF in Chromium (axe-core included), the editions, and nbval on the
# student edition of every notebook (pyproject.toml's testpaths: tests and _student/book).
# What the tests read is built first, JOBS targets at a time (the two sites and the PDF are
# built side by side once the notebooks are executed), then one pytest runs everything; the
# 25 slowest tests are listed at the end (where the time goes).
test:
	$(MAKE) --no-print-directory --output-sync=target -j$(JOBS) test-inputs
	$(PYTEST) --durations=25

test-inputs: book student student-book editions pdf

# The same tests in four shards that can run apart (the workflow runs each on its own runner);
# together they run what `make test` runs (tests/test_config_publishing.py checks it):
#   test-unit      tests/ but those marked `site`: unit, parity, widgets, exercises, release,
#                  config, evidence, book (the student edition is written first: a test
#                  checks that it is current)
#   test-nbval-1   nbval on the student edition of every other notebook of book/ (the 1st, 3rd, ...)
#   test-nbval-2   nbval on the others (the 2nd, 4th, ...)
#   test-site      builds the site, the student site, the editions and the PDF (executing the
#                  notebooks), then the tests marked `site`
NOTEBOOKS := $(sort $(filter-out book/instructor_%,$(wildcard book/*.ipynb)))
every_other = $(foreach i,$(shell seq $(1) 2 $(words $(2))),$(word $(i),$(2)))
NBVAL_1 := $(patsubst book/%,_student/book/%,$(call every_other,1,$(NOTEBOOKS)))
NBVAL_2 := $(patsubst book/%,_student/book/%,$(call every_other,2,$(NOTEBOOKS)))

test-unit: student
	$(PYTEST) tests -m "not site"

test-nbval-1: student
	$(PYTEST) $(NBVAL_1)

test-nbval-2: student
	$(PYTEST) $(NBVAL_2)

test-site:
	$(MAKE) --no-print-directory --output-sync=target -j$(JOBS) book student-book editions pdf
	$(PYTEST) tests -m site

# Tests that need no notebook run, no built site and no browser: not marked `site` or `slow`.
test-fast: setup
	$(BIN)/python -m pytest tests -m "not site and not slow" -n $(JOBS)

# The student edition (solutions stripped, instructor pages left out; rewritten on every
# run) in _student/, from the committed notebooks: what instructors hand out, and what
# nbval runs.
student: setup
	$(BIN)/python -m coursekit.release student _student --force

# The student site in _build/student/_build/html: the student edition of the executed book
# (nothing is executed again), its launch buttons opening the student edition's branch.
student-book: executed
	$(BIN)/python -m coursekit.release student $(STUDENT_SRC) --src $(EXECUTED) --force
	COURSE_EDITION=student $(JB_BUILD) $(STUDENT_SRC)

# The learner edition (plain Markdown: reads cleanly in JupyterLab, Colab, VS Code) in _learner/.
learner: setup
	rm -rf _learner
	$(BIN)/python -m coursekit.release learner _learner

# The trees the publishing workflow commits to the branches that the Colab and Binder
# buttons open (_config.yml, course_launch_branches): the learner and student editions
# beside course_lib, pyproject.toml and binder/, in _build/editions/<edition>.
editions: setup
	$(BIN)/python tools/editions.py --out $(EDITIONS)

# The whole book as one PDF, _build/pdf/book.pdf (Chromium's print to PDF, chapters in
# reading order, the explorers' static figures in place of the widgets).
pdf: book
	$(BIN)/python tools/book_pdf.py --site _build/html --out _build/pdf/book.pdf

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/actionlint

bench: setup
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf _build _student _learner .pytest_cache
