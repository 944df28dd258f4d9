"""Finished folds kept across a killed run: each fold's out-of-fold probabilities, written whole as it ends.

A fold is a Trainer run and a predict run: minutes each on photos. `OUTPUT/fold_results/<k>.npz` holds
fold k's held-out positions, their class probabilities and its record, under a key of every option
that decides them (the fold's Trainer options, the fold count and seed, the examples' manifest), so a
rerun with the same options takes the fold as it was and one with other options trains it again.
The folder is removed when the run completes (a later run starts anew), like the Trainer's backups.

    kept = KeptFolds(storage.join(out.root, RESULTS_DIR), fold_key(config, manifest_bytes))
    done = kept.load(fold)      # (positions, probabilities, record) or None
    kept.save(fold, positions, probabilities, record)
"""
from __future__ import annotations

import hashlib
import io
import json
from typing import Any

import numpy as np

from ..core import storage
from .config import LabelFinderConfig

RESULTS_DIR = "fold_results"


def fold_key(config: LabelFinderConfig, fold: int, manifest: bytes) -> str:
    """What decides fold `fold`'s probabilities, hashed: its Trainer options, the folds, the examples."""
    trainer = config.fold_trainer_config(fold, "-").flat()
    described = json.dumps({"trainer": {k: repr(v) for k, v in sorted(trainer.items())}, "folds": config.folds,
                            "memory_mb": config.memory_mb}, sort_keys=True).encode()
    return hashlib.sha256(described + b"\0" + manifest).hexdigest()


class KeptFolds:
    """Fold results under `folder`, each valid for the key it was saved with."""

    def __init__(self, folder: str, keys: list[str]) -> None:
        self.folder, self.keys = folder, keys

    def _path(self, fold: int) -> str:
        return storage.join(self.folder, f"{fold}.npz")

    def load(self, fold: int) -> tuple[np.ndarray, np.ndarray, dict[str, Any]] | None:
        if not storage.is_file(self._path(fold)):
            return None
        with np.load(io.BytesIO(storage.read_bytes(self._path(fold)))) as saved:
            if str(saved["key"]) != self.keys[fold]:
                return None  # made with other options: trained again
            return saved["positions"], saved["probabilities"], json.loads(str(saved["record"]))

    def save(self, fold: int, positions: np.ndarray, probabilities: np.ndarray, record: dict[str, Any]) -> None:
        buffer = io.BytesIO()
        np.savez(buffer, key=self.keys[fold], positions=positions, probabilities=probabilities,
                 record=json.dumps(record))
        storage.write_bytes(self._path(fold), buffer.getvalue())  # whole or absent

    def clear(self) -> None:
        storage.remove(self.folder)
