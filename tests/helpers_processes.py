"""Waiting on what a subprocess does (a file, an object, a recorded checkpoint), never on a fixed sleep.

    first = subprocess.Popen(["shardflow", "train", ..., "--output", out, "--checkpoint-every", "10"])
    wait_for(lambda: recorded_checkpoint(f"{out}/checkpoints") >= 2, first, 240, "a second checkpoint")
    first.send_signal(signal.SIGKILL)       # lands in training, after two complete checkpoints
"""
from __future__ import annotations

import re
import subprocess
import time
from typing import Callable

import pytest

from shardflow.core import storage

POLL_SECONDS = 0.05
# The state file of a tf.train.CheckpointManager (what Keras' BackupAndRestore keeps in `<backup>/chief/`).
_LATEST = re.compile(r'^model_checkpoint_path: "(?:.*/)?ckpt-(\d+)"', re.MULTILINE)


def wait_for(predicate: Callable[[], object], process: subprocess.Popen, timeout: float, what: str) -> None:
    """Returns as soon as `predicate()` is true while `process` runs.

    Fails the test naming `what` when the process exits first or `timeout` seconds pass; the process
    is then killed, so a failed wait leaves none behind.
    """
    deadline = time.monotonic() + timeout
    try:
        while not predicate():
            if process.poll() is not None:
                pytest.fail(f"the process exited with code {process.returncode} before {what}")
            if time.monotonic() > deadline:
                pytest.fail(f"no {what} within {timeout:g} s")
            time.sleep(POLL_SECONDS)
    except BaseException:
        if process.poll() is None:
            process.kill()
            process.wait()
        raise


def recorded_checkpoint(backup_dir: str) -> int:
    """N of the last checkpoint (`ckpt-N`) that Keras' BackupAndRestore in `backup_dir` (a path or URI)
    recorded as complete, 0 before the first.

    The CheckpointManager names a checkpoint in its state file `chief/checkpoint` only after its data
    and index are written, and before it deletes the one it replaces: the named one is always whole.
    """
    try:
        state = storage.read_text(storage.join(backup_dir, "chief", "checkpoint"))
    except FileNotFoundError:
        return 0
    match = _LATEST.search(state)
    return int(match.group(1)) if match else 0
