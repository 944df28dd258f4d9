"""The source a run was made with: the git commit of the shardflow checkout that ran it, and whether its tree
had uncommitted changes. Read when the run starts and kept in the run's own files (RUN/<job>/logs/source.json),
so a run sent to MLflow later (`shardflow track`) is tagged with the commit it ran, not the sender's.

    shardflow_source()             # {"commit": "9f3c…", "dirty": True} run from a checkout; {} from an image

>>> source_state(Path("/"))
{}
"""
from __future__ import annotations

import subprocess
from pathlib import Path

GIT_SECONDS = 5
SOURCE_RECORD = "source.json"  # in RUN/<job>/logs/ (run_layout.LOGS)


def shardflow_source() -> dict[str, object]:
    """The state of the checkout this shardflow runs from; {} when it is installed (an image, a wheel): a
    checkout around an installed copy is not the source that runs."""
    package = Path(__file__).resolve().parents[1]
    return source_state(package) if (package.parent / ".git").exists() else {}


def source_state(inside: Path) -> dict[str, object]:
    """{"commit", "dirty"} of the git work tree holding `inside`; {} outside a work tree or without git."""
    folder = inside if inside.is_dir() else inside.parent
    head = _git(folder, "rev-parse", "--verify", "HEAD")
    if head is None:
        return {}
    # Tracked files changed or staged; untracked files are not the source that ran (scratch, outputs).
    changed = _git(folder, "status", "--porcelain", "--untracked-files=no")
    return {"commit": head, "dirty": bool(changed)} if changed is not None else {"commit": head}


def _git(folder: Path, *args: str) -> str | None:
    """git's output in `folder` (stripped), None when git fails, is missing or hangs."""
    try:
        done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True,
                              timeout=GIT_SECONDS)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None
