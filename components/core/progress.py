"""Progress a person can read: done/total, share, rate and time left; and the ingest reporter that prints it.

`progress_text` is the one format, used by ExampleGen's and Transform's reporter here and by the
Trainer's step lines:

>>> progress_text(2_500, 10_000, 50.0, "rows")
'2,500/10,000 rows (25%) after 50 s, 50 rows/s, ETA 2 min 30 s'
>>> progress_text(0, 10_000, 12.0, "rows")
'0/10,000 rows (0%) after 12 s, ETA unknown'
>>> format_seconds(3725)
'1 h 02 min'

`ProgressReporter` reads the done-markers that workers leave per chunk. It is runner-independent:
it needs only the storage the workers write to (a local folder or an object store prefix, listed
through `storage`).
"""
from __future__ import annotations

import os
import threading
import time
from typing import Callable

from . import storage


def format_seconds(seconds: float) -> str:
    """'42 s', '2 min 30 s', '1 h 02 min' (rounded to whole seconds / minutes)."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def format_rate(per_second: float, unit: str) -> str:
    """'50 rows/s', '1,234 ex/s', '0.25 rows/s' (small rates keep two decimals)."""
    return f"{per_second:,.0f} {unit}/s" if per_second >= 10 else f"{per_second:.2g} {unit}/s"


def progress_text(done: int, total: int, elapsed: float, unit: str) -> str:
    """One progress statement; the rate is the average since the start (start-up included, so ETAs err long)."""
    share = 100.0 * done / total if total else 100.0
    text = f"{done:,}/{total:,} {unit} ({share:.0f}%) after {format_seconds(elapsed)}"
    if done <= 0 or elapsed <= 0:
        return text + ", ETA unknown"
    rate = done / elapsed
    return text + f", {format_rate(rate, unit)}, ETA {format_seconds(max(total - done, 0) / rate)}"


class ProgressReporter:
    """Prints rows done, rate and ETA every `interval` seconds while a run lasts (`with ProgressReporter(...):`).

    `clock` is injectable (tests use a fake one).
    """

    def __init__(self, done_dir: str | os.PathLike, total_rows: int, interval: float,
                 echo: Callable[[str], None] = print, clock: Callable[[], float] = time.monotonic) -> None:
        self.done_dir, self.total_rows, self.interval, self.echo = os.fspath(done_dir), total_rows, interval, echo
        self.clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._started = clock()
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

    def report(self) -> str:
        """The current progress line (also what the reporting thread prints)."""
        return "progress: " + progress_text(self.rows_done(), self.total_rows, self.clock() - self._started, "rows")

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.echo(self.report())

    def __enter__(self) -> "ProgressReporter":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
