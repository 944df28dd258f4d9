"""Tests run in the TFX environment (.venv-tfx: Python 3.10, tfx 1.16): `make test-tfx`."""
from __future__ import annotations

import os
import warnings

# google-api-core warns on every import that Python 3.10 is old: that is this environment's point. Set before
# the process defaults, whose PYTHONWARNINGS names only the Python 3.11 warnings.
os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
warnings.filterwarnings("ignore", category=FutureWarning)

from shardflow.core.process_defaults import apply_process_defaults  # noqa: E402

apply_process_defaults()  # as the command and a step: legacy Keras (TFT/TFMA's tf.keras is tf_keras), quiet TF

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def digits(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """shardflow's digits demo data: 1,797 28x28 grayscale PNGs, train.csv and eval.csv (x,y)."""
    from shardflow.demo_data import write_digits

    root = tmp_path_factory.mktemp("demo") / "digits"
    write_digits(root)
    return root
