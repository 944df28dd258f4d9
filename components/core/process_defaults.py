"""The process defaults: TensorFlow's log level, legacy Keras, quiet warnings; the one place they are set.

Every process entry point calls `apply_process_defaults()` before anything imports TensorFlow: the
`shardflow` command (components/cli.py), a pipeline step (pipelines/step_bodies.py, which a step's
container and the local step worker import first), the benchmarks, and the tests' conftest.py files
(tests/ and tests_tfx/). So the command, a pipeline step and the tests run with the same values.
Each is a default (`setdefault`): a value the user set in the environment wins. They are environment
variables, so they also reach the processes an entry point starts (Beam workers, the step worker,
a test's subprocess). The Makefile sets none of them: every recipe runs one of those entry points.
tests/architecture/test_process_defaults.py fails if any other module assigns them.

- `TF_CPP_MIN_LOG_LEVEL=3`: TensorFlow logs "Unable to register cuDNN / cuFFT / cuBLAS factory" at
  ERROR on every start, GPU or not; level 2 shows them, 3 hides them. What goes wrong in TensorFlow
  reaches shardflow as a Python exception with its message (the one line a user sees), so level 3
  hides noise and no error of ours. Set 0 to see TensorFlow's C++ log.
- `TF_USE_LEGACY_KERAS=1`: `tf.keras` is tf-keras (Keras 2), which the Trainer's models, TFT and
  TFMA are written for; it must be set before TensorFlow is imported.
- `PYTHONWARNINGS`, and the same filters in this interpreter: google-api-core's FutureWarning about
  the Python version and setuptools' "pkg_resources is deprecated" are not the user's business.
- Threads: shardflow sets no thread count; TensorFlow, Beam and numpy size their pools from the
  machine. A thread setting (e.g. `OMP_NUM_THREADS`) belongs in `PROCESS_DEFAULTS`, so every entry
  point gets it.

A TensorFlow-only child (the infra validator's probe, loading a model as TF Serving would) gets
`tensorflow_only_environment`: the same log level, without legacy Keras (with it, importing
TensorFlow imports tf_keras).

    >>> env = with_process_defaults({"TF_CPP_MIN_LOG_LEVEL": "0"})
    >>> env["TF_CPP_MIN_LOG_LEVEL"], env["TF_USE_LEGACY_KERAS"]
    ('0', '1')
    >>> sorted(tensorflow_only_environment({"TF_USE_LEGACY_KERAS": "1", "HOME": "/tmp"}))
    ['HOME', 'PYTHONWARNINGS', 'TF_CPP_MIN_LOG_LEVEL']
"""
from __future__ import annotations

import os
import warnings
from typing import Mapping

TF_LOG_LEVEL = "TF_CPP_MIN_LOG_LEVEL"
LEGACY_KERAS = "TF_USE_LEGACY_KERAS"
# Hidden warnings, as PYTHONWARNINGS entries (for child processes) and as this interpreter's filters.
_QUIET_WARNINGS = ("ignore::FutureWarning:google.api_core._python_version_support,"
                   "ignore:pkg_resources is deprecated:UserWarning")
PROCESS_DEFAULTS: dict[str, str] = {TF_LOG_LEVEL: "3", LEGACY_KERAS: "1", "PYTHONWARNINGS": _QUIET_WARNINGS}


def with_process_defaults(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of `env` with every process default it does not set itself (a child process's environment)."""
    return {**PROCESS_DEFAULTS, **env}


def tensorflow_only_environment(env: Mapping[str, str]) -> dict[str, str]:
    """`env` with the process defaults, less legacy Keras: a child that imports TensorFlow alone."""
    return {name: value for name, value in with_process_defaults(env).items() if name != LEGACY_KERAS}


def apply_process_defaults() -> None:
    """Sets the process defaults in this process's environment (before TensorFlow is imported) and its
    warning filters. Idempotent; a value already in the environment is kept."""
    for name, value in PROCESS_DEFAULTS.items():
        os.environ.setdefault(name, value)
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"google\.")
    # tensorflow_hub (imported by Beam's TensorFlow model handler) warns that pkg_resources is deprecated.
    warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)
