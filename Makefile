# mmposmlp developer entry points. Every target installs first if needed (idempotent).
PY := .venv/bin/python
TOY := data/toy
DEMO_DIR := work_dirs/demo

.PHONY: install test test-slow test-slurm test-all test-mutation demo toy-data clean

install:
	bash tools/setup_env.sh

toy-data: install
	$(PY) tools/misc/make_toy_datasets.py --out $(TOY)

# The default suite (what CI runs through .ci/run): everything but the slow tests. The Slurm, multi-node
# (network namespaces) and fault tests run where root and Debian's packages are available (CI) and skip
# with a one-line reason elsewhere.
test: install
	$(PY) -m pytest tests -m "not slow" -q -p no:cacheprovider -rs

test-slow: install
	$(PY) -m pytest tests -m "slow" -q -p no:cacheprovider

test-slurm: install
	$(PY) -m pytest tests -m "slurm" -q -p no:cacheprovider

test-all: install
	$(PY) -m pytest tests -q -p no:cacheprovider

# Curated mutants against the tests that should catch them (~30-40 min on 2 cores; docs/testing.md).
test-mutation: install
	$(PY) .dev_scripts/mutation_test.py --json work_dirs/mutation.json

demo: install
	bash tools/demo.sh

clean:
	rm -rf work_dirs $(TOY)
