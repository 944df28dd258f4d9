"""Outputs that appear whole or not at all: write to a temporary name beside the target, then rename."""
from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any


def temp_sibling(path: Path) -> Path:
    """A unique temporary name in the same directory, so that `os.replace` is atomic."""
    return path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:12]}")


def atomic_write_bytes(path: str | Path, data: bytes, durable: bool = True) -> None:
    """Writes `data` under a temporary name, then renames it to `path`.

    `durable=False` skips the fsync: for staging files that a crash discards anyway.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(path)
    with open(tmp, "wb") as out:
        out.write(data)
        if durable:
            out.flush()
            os.fsync(out.fileno())
    os.replace(tmp, path)


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def remove_path(path: Path) -> None:
    """Removes a file or a directory tree; a missing path is fine."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
