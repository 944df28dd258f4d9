# The two commands a user needs: `make run` and `make test`. Both set the environment up first.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LOCK := requirements/requirements.lock
DEMO := demo_data
# TensorFlow's log level and legacy Keras: not here. Every recipe runs an entry point that sets them
# (the command, the tests' conftest.py, benchmarks/run_all.py): components/core/process_defaults.py.

# The TFX environment (issue 15): Python 3.10 and tfx 1.16, apart from the main one (see requirements/tfx.in).
TFX_VENV := .venv-tfx
TFX_BIN := $(TFX_VENV)/bin
TFX_STAMP := $(TFX_VENV)/.installed
TFX_LOCK := requirements/tfx.lock
PYTHON310 ?= $(shell pyenv root 2>/dev/null)/versions/3.10.13/bin/python3.10

# KServe's storage initializer (issue 66): kserve-storage pins protobuf 7, so it has its own environment; the
# serving tests download a pushed version with it (tests/kserve_download.py). ~110 MB, ~8 s to build.
KSERVE_VENV := .venv-kserve
KSERVE_STAMP := $(KSERVE_VENV)/.installed
KSERVE_LOCK := requirements/kserve.lock

.PHONY: setup run test test-fast coverage bench golden clean lock tfx-setup test-tfx tfx-lock kserve-setup kserve-lock yolo-setup yolo-lock

setup: $(STAMP)

# Rebuilt only when the lock or setup.py change: idempotent and ~1 s when done. Bytecode is compiled at
# install: where PYTHONDONTWRITEBYTECODE is set, every process (each pipeline step, each test's
# subprocess) would otherwise compile TensorFlow's, Beam's and TFX's sources again: ~7 s a process.
$(STAMP): $(LOCK) setup.py
	@command -v uv >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet uv || python3 -m pip install --quiet uv
	@test -x $(BIN)/python || uv venv --quiet --python $(PYTHON) $(VENV) 2>/dev/null || uv venv --quiet $(VENV)
	uv pip install --quiet --compile-bytecode --python $(BIN)/python -r $(LOCK) pip
	uv pip install --quiet --python $(BIN)/python --no-deps -e .
	@touch $(STAMP)

# The whole pipeline on the digits demo data, with kfp.local: ExampleGen → validation → Transform →
# Trainer → Evaluator → Push (when blessed). Outputs and the serving directory in runs/digits.
run: setup
	$(BIN)/shardflow demo-data --output $(DEMO)
	$(BIN)/shardflow run --index train=$(DEMO)/digits/train.csv --index eval=$(DEMO)/digits/eval.csv \
	    --data-root $(DEMO)/digits --output runs/digits --train-args "--epochs 10" --threshold "accuracy>=0.9"

# The tiers (pytest.ini): unit, then pipeline, then cluster; each tier's wall time and its 40 slowest tests
# are printed. Every tier runs on 2 pytest-xdist workers. Measured on 2 cores, one after the other: the unit
# tier 134 s serial, 99 s on 2 workers (893 tests); the pipeline tier 1,003 s on 2 workers.
PYTEST_UNIT ?= -n 2 --dist loadfile
PYTEST_PIPELINE ?= -n 2 --dist loadfile  # a module's tests on one worker: its module fixtures built once
PYTEST_CLUSTER ?= -n 2 --dist loadfile
export PYTEST_UNIT PYTEST_PIPELINE PYTEST_CLUSTER

test: setup tfx-setup kserve-setup
	bash tests/run_tiers.sh $(BIN)/python unit pipeline cluster
	@started=$$(date +%s); $(TFX_BIN)/python -m pytest -q --durations=15 tests_tfx; status=$$?; \
	    echo "== tests_tfx: $$(( $$(date +%s) - started )) s"; exit $$status

# Line coverage of the whole main suite, subprocesses included (.coveragerc); the total is the last line.
coverage: setup
	rm -rf .coverage-data && mkdir -p .coverage-data
	-COVERAGE_RCFILE=$(CURDIR)/.coveragerc COVERAGE_DATA_DIR=$(CURDIR)/.coverage-data \
	    $(BIN)/python -m coverage run -m pytest -q $(PYTEST_PIPELINE) tests
	cd .coverage-data && COVERAGE_RCFILE=$(CURDIR)/.coveragerc $(BIN)/python -m coverage combine -q . \
	    && COVERAGE_RCFILE=$(CURDIR)/.coveragerc $(BIN)/python -m coverage report | tail -1

# The edit loop: the unit tier alone (no pipeline step, no server).
test-fast: setup
	bash tests/run_tiers.sh $(BIN)/python unit

tfx-setup: $(TFX_STAMP)

# Like $(STAMP): rebuilt only when the lock or setup.py change. shardflow goes in with --no-deps: its
# install_requires pin the main environment's kfp 2.13; the lock brings TF, Beam, TFDV and TFT itself.
$(TFX_STAMP): $(TFX_LOCK) setup.py
	@command -v uv >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet uv || python3 -m pip install --quiet uv
	@test -x $(TFX_BIN)/python || test -x "$(PYTHON310)" || { echo "the TFX environment needs Python 3.10:" \
	    "set PYTHON310=/path/to/python3.10 (pyenv's 3.10.13 is the default)" >&2; exit 1; }
	@test -x $(TFX_BIN)/python || uv venv --quiet --python $(PYTHON310) $(TFX_VENV)
	uv pip install --quiet --compile-bytecode --python $(TFX_BIN)/python -r $(TFX_LOCK)
	uv pip install --quiet --python $(TFX_BIN)/python --no-deps -e .
	@touch $(TFX_STAMP)

kserve-setup: $(KSERVE_STAMP)

$(KSERVE_STAMP): $(KSERVE_LOCK)
	@command -v uv >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet uv || python3 -m pip install --quiet uv
	@test -x $(KSERVE_VENV)/bin/python || uv venv --quiet --python $(PYTHON) $(KSERVE_VENV)
	uv pip install --quiet --python $(KSERVE_VENV)/bin/python -r $(KSERVE_LOCK)
	@touch $(KSERVE_STAMP)

kserve-lock:
	uv pip compile --python-version 3.11 --python-platform x86_64-manylinux_2_36 requirements/kserve.in -o $(KSERVE_LOCK)

# Ultralytics YOLOv8n, the detection_yolo benchmark's contender (issue 67): torch and ultralytics apart from
# shardflow's environment (which never imports torch), built by `make bench`, not by `make test`. pip, not uv:
# pip takes torch and torchvision from this machine's disk (requirements/yolo.in). ~6 GB, ~3 min.
YOLO_VENV := .venv-yolo
YOLO_STAMP := $(YOLO_VENV)/.installed
YOLO_LOCK := requirements/yolo.lock

yolo-setup: $(YOLO_STAMP)

$(YOLO_STAMP): $(YOLO_LOCK)
	@test -x $(YOLO_VENV)/bin/python || $(PYTHON) -m venv $(YOLO_VENV)
	$(YOLO_VENV)/bin/pip install --quiet --disable-pip-version-check -r $(YOLO_LOCK)
	@touch $(YOLO_STAMP)

yolo-lock:
	rm -rf $(YOLO_VENV) && $(PYTHON) -m venv $(YOLO_VENV)
	$(YOLO_VENV)/bin/pip install --quiet --disable-pip-version-check -r requirements/yolo.in
	{ echo "# pip freeze of .venv-yolo built from requirements/yolo.in with pip on Python 3.11, x86_64 (make yolo-lock)."; \
	    $(YOLO_VENV)/bin/pip freeze --disable-pip-version-check; } > $(YOLO_LOCK)
	@touch $(YOLO_STAMP)

test-tfx: tfx-setup
	$(TFX_BIN)/python -m pytest -q --durations=15 tests_tfx

# cleanlab (AGPL-3.0) is the label-issue benchmark's contender, never a dependency of shardflow: it is installed
# apart, in .bench-deps/, which only benchmarks/label_issues_bench.py puts on its path.
BENCH_DEPS := .bench-deps
$(BENCH_DEPS)/.installed: requirements/bench.txt
	uv pip install --quiet --python $(BIN)/python --no-deps --target $(BENCH_DEPS) -r requirements/bench.txt
	@touch $@

bench: setup $(BENCH_DEPS)/.installed yolo-setup
	$(BIN)/python -m benchmarks.run_all --publish $(BENCH_ARGS)

# The golden compiled pipeline the tests compare with; regenerate after a deliberate pipeline change.
golden: setup
	$(BIN)/shardflow compile --output tests/golden/pipeline.yaml --image registry.example.com/ml/shardflow@sha256:3f1c5e0a9b7d2c4e6f8a0b1c3d5e7f9a1b3c5d7e9f0a2b4c6d8e0f1a3b5c7d9e

# The image's lock (k8s/Dockerfile) is resolved within the main one: the same versions, no test tools.
lock:
	uv pip compile --python-version 3.11 --python-platform x86_64-manylinux_2_36 \
	    requirements/requirements.in -o $(LOCK)
	cd requirements && uv pip compile --python-version 3.11 --python-platform x86_64-manylinux_2_36 \
	    runtime.in -o runtime.lock

tfx-lock:
	uv pip compile --python $(PYTHON310) --python-version 3.10 --python-platform x86_64-manylinux_2_36 \
	    requirements/tfx.in -o $(TFX_LOCK)

clean:
	rm -rf $(VENV) $(TFX_VENV) $(KSERVE_VENV) $(YOLO_VENV) $(BENCH_DEPS) runs $(DEMO) build *.egg-info .coverage-data
