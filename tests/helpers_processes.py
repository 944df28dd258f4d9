"""Waiting on what a subprocess does (a file, an object, a recorded checkpoint), never on a fixed sleep;
and a subprocess's own peak memory.

    first = subprocess.Popen(["shardflow", "train", ..., "--output", out, "--checkpoint-every", "10"])
    wait_for(lambda: recorded_checkpoint(f"{out}/checkpoints") >= 2, first, 240, "a second checkpoint")
    first.send_signal(signal.SIGKILL)       # lands in training, after two complete checkpoints

    done = run_with_peak_rss([sys.executable, "-m", "shardflow", "evaluate", ...])
    done.returncode, done.peak_rss, done.stderr
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
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


def running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie, dead but not yet reaped by its parent, is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def ends_within(pid: int, seconds: float) -> bool:
    """Whether the process `pid` ends within `seconds` (polled: it is not ours to wait for)."""
    deadline = time.monotonic() + seconds
    while running(pid) and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
    return not running(pid)


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


# Runs argv[1:] and prints its peak RSS in bytes. A launcher, because Linux's exec copies the exec'ing
# process's high-water RSS into the child's ru_maxrss, and subprocess execs from pytest itself (vfork):
# wait4 on a child of pytest reports max(the child's peak, pytest's peak so far), and earlier
# in-process tests set the latter (a 2.6 GB pytest made a 1.97 GB Trainer read 2.6 GB+).
_PEAK_OF = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[1:])
_, status, usage = os.wait4(child.pid, 0)
print(usage.ru_maxrss * 1024, file=sys.stderr)  # Linux reports kilobytes; the last line of stderr
sys.exit(os.waitstatus_to_exitcode(status))
"""


@dataclass(frozen=True)
class PeakRun:
    returncode: int
    peak_rss: int  # bytes: the command's own peak resident memory
    stdout: str
    stderr: str  # the command's own (the launcher's line removed)


def run_with_peak_rss(command: list[str]) -> PeakRun:
    """Runs `command` to its end; its exit status, output and own peak RSS (from wait4 in a launcher).
    The environment is a user's: the test run's log-level and warning settings are left out, so the
    `shardflow` command's own defaults apply (its stderr is what a user reads)."""
    env = {name: value for name, value in os.environ.items() if name not in ("TF_CPP_MIN_LOG_LEVEL", "PYTHONWARNINGS")}
    done = subprocess.run([sys.executable, "-c", _PEAK_OF, *command], env=env, capture_output=True, text=True)
    *lines, peak = done.stderr.rstrip("\n").split("\n")
    return PeakRun(done.returncode, int(peak), done.stdout, "\n".join(lines))


def backed_up_step(model: Path) -> int:
    """The step a Trainer output's last whole backup resumes at (checkpoints/stream.json), -1 before the first."""
    try:
        return json.loads((model / "checkpoints" / "stream.json").read_text())["step"]
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return -1
