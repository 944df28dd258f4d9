"""Progress of a long ingest, read from the done-markers that workers leave per chunk.

Runner-independent: it needs only the shared filesystem the workers write to.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Callable


class ProgressReporter:
    """Prints rows done every `interval` seconds while a run lasts (`with ProgressReporter(...):`)."""

    def __init__(self, done_dir: Path, total_rows: int, interval: float, echo: Callable[[str], None] = print) -> None:
        self.done_dir, self.total_rows, self.interval, self.echo = done_dir, total_rows, interval, echo
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._started = time.monotonic()

    def rows_done(self) -> int:
        rows = 0
        for marker in self.done_dir.glob("*") if self.done_dir.is_dir() else []:
            try:
                rows += int(marker.read_text() or 0)
            except (OSError, ValueError):  # a marker being renamed into place
                continue
        return rows

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
