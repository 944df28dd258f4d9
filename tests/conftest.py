"""Shared test set-up: quiet TensorFlow, tf-keras, and small real datasets written per test."""
from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
