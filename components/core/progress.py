"""Progress of a long ingest, read from the done-markers that workers leave per chunk.

Runner-independent: it needs only the storage the workers write to (a local folder or an object
store prefix, listed through `storage`).
"""
from __future__ import annotations

import os
import threading
import time
from typing import Callable

from . import storage


class ProgressReporter:
    """Prints rows done every `interval` seconds while a run lasts (`with ProgressReporter(...):`)."""

    def __init__(self, done_dir: str | os.PathLike, total_rows: int, interval: float,
                 echo: Callable[[str], None] = print) -> None:
        self.done_dir, self.total_rows, self.interval, self.echo = os.fspath(done_dir), total_rows, interval, echo
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._started = time.monotonic()
        self._seen: dict[str, int] = {}  # a marker never changes: each is read once (remote reads cost)

    def rows_done(self) -> int:
        try:
            names = storage.list_names(self.done_dir)
        except Exception:  # noqa: BLE001  (a store that did not answer: the next interval tries again)
            return sum(self._seen.values())
        for name in names:
            if name in self._seen or name.startswith("."):  # "." : a marker still under its temporary name
                continue
            try:
                self._seen[name] = int(storage.read_text(storage.join(self.done_dir, name)) or 0)
            except (OSError, ValueError):
                continue
        return sum(self._seen.values())

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            rows = self.rows_done()
            elapsed = time.monotonic() - self._started
            share = 100.0 * rows / self.total_rows if self.total_rows else 100.0
            self.echo(f"progress: {rows:,}/{self.total_rows:,} rows ({share:.0f}%) after {elapsed:.0f} s")

    def __enter__(self) -> "ProgressReporter":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
