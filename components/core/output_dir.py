"""The one output-directory life cycle: prepare → stage → publish → mark complete, on every filesystem.

Every component writes its output through an `OutputDir`; the completion marker (a manifest, or the
component's summary) is written last, so its presence means the output is whole:

1. `prepare()` removes the marker first (from then on the output is "not complete"), then the
   `unstaged` files of an earlier run and any staging left by a killed run.
2. The run writes what it will publish under `staged(name)`, and scratch files under `staging`.
3. `publish(names)` puts the staged items in place and removes owned items from earlier runs that
   this run did not produce (no stale split survives a rerun).
4. `mark_complete(obj)` writes the marker, atomically (`complete(names, obj)` does 3 and 4).

Local filesystems stage under `<root>/.staging/` and publish with atomic renames. Object stores have
no rename: there `staged(name)` is the final name itself, `prepare()` deletes the owned items of the
previous run, and only the marker — written last, listing every shard — makes them trusted. A killed
run leaves no marker on either.

`unstaged` names the files a run writes straight into the root, each whole or absent, that a reader
may need without a marker: the lists a failed run leaves for its user (ExampleGen's rejected rows,
its near-duplicate pairs). `prepare()` removes them right after the marker, so whichever of them a
killed or failed run leaves is that run's own, never an earlier run's.

>>> import tempfile
>>> out = OutputDir(tempfile.mkdtemp(), owned=("Split-*", "statistics"))
>>> staging = out.prepare()
>>> storage.write_text(storage.join(out.staged("Split-train"), "a.txt"), "x")
>>> out.complete(["Split-train"], {"ok": True}); out.discard()
>>> storage.list_names(out.root), out.is_complete()
(['Split-train', 'manifest.json'], True)
>>> listed = OutputDir(out.root, owned=out.owned, unstaged=("pairs.jsonl",))
>>> storage.write_text(storage.join(out.root, "pairs.jsonl"), "an earlier run's list")
>>> _ = listed.prepare(); storage.list_names(out.root)   # the marker first, then the earlier run's list
['.staging', 'Split-train']
"""
from __future__ import annotations

import contextlib
import fnmatch
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from . import storage
from .manifest import MANIFEST_NAME

STAGING = ".staging"


@dataclass(frozen=True)
class OutputDir:
    """A component's output location (local path or URI) and what it owns there."""

    root: str
    marker: str = MANIFEST_NAME
    owned: tuple[str, ...] = ()  # glob patterns of the names this component publishes
    # Alternative completion markers, one of which a run writes instead of `marker` (the Evaluator's
    # BLESSED / NOT_BLESSED): removed first with it, and each one means "complete".
    other_markers: tuple[str, ...] = ()
    unstaged: tuple[str, ...] = ()  # files written in place, before the marker (see above)

    @property
    def staging(self) -> str:
        return storage.join(self.root, STAGING)

    @property
    def marker_path(self) -> str:
        return storage.join(self.root, self.marker)

    @property
    def in_place(self) -> bool:
        """Items are written where they are published: the root's scheme has no atomic rename to
        move them there (object stores); only the marker, written last, makes the output complete."""
        return not storage.can_rename(self.root)

    @property
    def publish_root(self) -> str:
        """Where items to be published are written: the staging area, or the root when `in_place`."""
        return self.root if self.in_place else self.staging

    def staged(self, name: str) -> str:
        """Where the item to be published as `name` is written during the run."""
        return storage.join(self.publish_root, name)

    def _owned_names(self) -> list[str]:
        names = storage.list_names(self.root)
        return [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in self.owned)]

    def prepare(self) -> str:
        """Invalidates the output (marker first) and returns a fresh staging location."""
        for name in (self.marker, *self.other_markers, *self.unstaged):
            storage.remove(storage.join(self.root, name))
        storage.remove(self.staging)
        if self.in_place:  # staged == final there: clear the previous run's items now
            for name in self._owned_names():
                storage.remove(storage.join(self.root, name))
        storage.makedirs(self.staging)
        return self.staging

    def publish(self, names: Iterable[str]) -> None:
        """Moves the staged `names` into place; removes owned items this run did not produce."""
        names, in_place = list(names), self.in_place
        for stale in self._owned_names():
            if not (in_place and stale in names):  # written in place by this run: keep them
                storage.remove(storage.join(self.root, stale))
        if in_place:
            return
        for name in names:
            staged = self.staged(name)
            if storage.exists(staged):
                storage.move(staged, storage.join(self.root, name))

    def mark_complete(self, obj: Any, name: str | None = None) -> None:
        """Writes the completion marker (or the one of `other_markers` named), last and atomically.

        A str is written as text, anything else as JSON.
        """
        name = name or self.marker
        if name not in (self.marker, *self.other_markers):
            raise ValueError(f"{name!r} is not a completion marker of {self.root}")
        path = storage.join(self.root, name)
        if isinstance(obj, str):
            storage.write_text(path, obj)
        else:
            storage.write_json(path, obj)

    def complete(self, names: Iterable[str], obj: Any) -> None:
        """The end of every run: `publish(names)`, then the marker `obj` — last, so it lists only what is there."""
        self.publish(names)
        self.mark_complete(obj)

    def is_complete(self) -> bool:
        return any(storage.is_file(storage.join(self.root, n)) for n in (self.marker, *self.other_markers))

    @contextlib.contextmanager
    def staged_run(self) -> Iterator[str]:
        """`prepare()` on entry, `discard()` on exit whatever happened: the one staged run."""
        staging = self.prepare()
        try:
            yield staging
        finally:
            self.discard()

    def discard(self) -> None:
        """Removes the staging area (scratch files, and on local disks anything not published)."""
        storage.remove(self.staging)
