# Set-up and the two Quickstart jobs. Everything installs into the active Python environment.
PYTHON ?= python3
PIP := $(PYTHON) -m pip
# The CPU wheel; a GPU user installs their CUDA build of torch first and runs `make install TORCH=torch`.
TORCH ?= torch==2.13.0
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: install install-test browser demo test

install:
	$(PIP) install -q "$(TORCH)" wheel cython "numpy<2.5" setuptools
	# fairseq's build wants torch in its build environment: build against the one just installed
	$(PIP) install -q --no-build-isolation fairseq-fixed==0.12.3.1
	$(PIP) install -q -e .

install-test: install browser
	$(PIP) install -q -e '.[test]'

# Chromium and a CJK font for the review page's browser tests (Debian packages)
browser:
	@if [ ! -x /usr/bin/chromium ] || ! fc-list 2>/dev/null | grep -qi wqy; then \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq chromium fonts-wqy-microhei >/dev/null; \
	fi

demo: install
	$(PYTHON) -m repair.loop

# the test files shared out to TEST_WORKERS processes, a file's tests in one of them (they share its fixtures);
# -rs prints why each skipped test skipped (without ../shared/data the real-data tests do; REPAIR_NO_SKIP=1, which
# .ci/run sets, fails them instead)
TEST_WORKERS ?= 2
PYTEST_ARGS := -q -rfEs -n $(TEST_WORKERS) --dist loadfile
test: install-test
	$(PYTHON) -m pytest $(PYTEST_ARGS)
