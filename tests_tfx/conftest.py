"""Tests run in the TFX environment (.venv-tfx: Python 3.10, tfx 1.16): `make test-tfx`."""
from __future__ import annotations

import os
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # tf.keras inside TFT/TFMA is tf_keras, as TFX 1.16 expects
# google-api-core warns on every import that Python 3.10 is old: that is this environment's point.
os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
warnings.filterwarnings("ignore", category=FutureWarning)

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def digits(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """shardflow's digits demo data: 1,797 28x28 grayscale PNGs, train.csv and eval.csv (x,y)."""
    from shardflow.demo_data import write_digits

    root = tmp_path_factory.mktemp("demo") / "digits"
    write_digits(root)
    return root
