# Quick start:  make demo       (set up + index the shared corpora, or suture's own docs
#                                without them, + compare policies)
#               make test       (the whole test suite)
#               make test-fast  (everything not marked slow: no real model, no big corpora)
#               make apidocs    (the API reference from the docstrings, in build/apidocs)
VENV ?= .venv
PY := $(VENV)/bin/python
SUTURE := $(VENV)/bin/suture
SUTURE_DATA ?= ../shared/data
DEMO_INDEX ?= demo-index
export SUTURE_DATA

# Without the shared corpora the demo indexes suture's own documentation instead.
HAVE_DATA := $(wildcard $(SUTURE_DATA)/corpora)
DEMO_DOCS := README.md docs/architecture.md docs/scar.md docs/sprout.md docs/retrievers.md \
  docs/stores.md docs/usage.md
APIDOCS ?= build/apidocs

.PHONY: setup demo test test-fast lint check-data apidocs bench clean

setup: $(VENV)/.installed

# torch is pinned first: 2.13.0 is the CPU build on this machine's disk; any other
# spec would pull a CUDA build of several GB.
$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

# The demo needs the shared corpora; say where they were looked for before any work.
check-data:
	@test -d "$(SUTURE_DATA)/corpora" || { \
	  echo "error: no shared corpora at $(SUTURE_DATA)/corpora (SUTURE_DATA=$(SUTURE_DATA))." >&2; \
	  echo "Put the shared data in ../shared/data next to this repository, or run" >&2; \
	  echo "  make demo SUTURE_DATA=/path/to/shared/data" >&2; exit 1; }

ifneq ($(HAVE_DATA),)
demo: setup
	$(SUTURE) index $(SUTURE_DATA)/corpora --index $(DEMO_INDEX)
	$(SUTURE) info --index $(DEMO_INDEX)
	@for q in \
	  "How is a TCP connection established (three-way handshake)?" \
	  "When must a personal data breach be notified to the supervisory authority?" \
	  "How much revenue did Microsoft Cloud generate in fiscal year 2023?" \
	  "Under what conditions can the merger agreement be terminated?"; do \
	  $(SUTURE) compare "$$q" --index $(DEMO_INDEX) --policies topk,window,window2,parent,scar,scar-sentences || exit 1; \
	done
	$(SUTURE) query "How is a TCP connection established (three-way handshake)?" \
	  --index $(DEMO_INDEX) --k 3
else
demo: setup
	@echo "no shared corpora at $(SUTURE_DATA)/corpora: indexing suture's own docs instead" \
	  "(make demo SUTURE_DATA=/path/to/shared/data for the shared corpora)"
	$(SUTURE) index $(DEMO_DOCS) --index $(DEMO_INDEX)
	$(SUTURE) info --index $(DEMO_INDEX)
	@for q in \
	  "When does SCAR add a neighbouring chunk to a hit?" \
	  "Which store backends can hold an index?"; do \
	  $(SUTURE) compare "$$q" --index $(DEMO_INDEX) --policies topk,window,parent,scar,scar-sentences || exit 1; \
	done
	$(SUTURE) query "When does SCAR add a neighbouring chunk to a hit?" --index $(DEMO_INDEX) --k 3
endif

test: setup
	$(PY) -m pytest

test-fast: setup
	$(PY) -m pytest -m "not slow"

lint: setup
	$(VENV)/bin/ruff check src tests benchmarks scripts
	$(VENV)/bin/mypy src

# pdoc renders the docstrings offline; the output folder is git-ignored.
apidocs: setup
	$(PY) scripts/build_apidocs.py --out $(APIDOCS)

clean:
	rm -rf $(VENV) $(DEMO_INDEX) $(APIDOCS)
