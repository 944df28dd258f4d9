"""Retention: the served versions beyond the K most recent removed, never one something still serves or names.

    protected_versions("runs/serving")                   # {7, 5}: the pointer's version, a canary's
    retire_versions("runs/serving", keep=3, protect={4})  # [1, 2]: versions retired and removed

A retired version leaves `served_versions` (no rollback target any more) for the pointer's `retired_versions`, by
one compare-and-swap of the pointer; only then is its folder removed, `saved_model.pb` first (a push copies it
last), so a clean killed midway leaves a version that no longer looks whole, which the next clean (or the next
push's clean-up, as an abandoned claim's copy) removes. A rollback racing the retirement is refused
(`still_served`); a push racing it swaps over the new record.

Protected: the version the pointer names, a canary (CANARY.json's "version", or the pointer's "canary_version":
the deploy step's), and what the caller adds (`protect`: e.g. the registry alias's version, read by the command).
"""
from __future__ import annotations

from typing import Any

from ..core import storage
from .cleanup import remove_version
from .config import ServingChanged
from .layout import version_folder
from .serving import Served, read_served, served_history, write_record

CANARY = "CANARY.json"
RETIRED = "retired_versions"
RETIRE_ATTEMPTS = 20  # a conflict means a push, a rollback or a clean-up moved the pointer: read it again


def protected_versions(serving_dir: str) -> set[int]:
    """The versions no retention removes: the pointer's, and a canary's (CANARY.json or the pointer's field)."""
    served = read_served(serving_dir)
    found = {served.version} if served.version is not None else set()
    canary = storage.join(serving_dir, CANARY)
    named = [(served.record or {}).get("canary_version")]
    if storage.is_file(canary):
        named.append(storage.read_json(canary).get("version"))
    return found | {number for number in named if isinstance(number, int) and not isinstance(number, bool)}


def retirees(history: dict[str, Any], keep: int, protect: set[int]) -> list[int]:
    """The served versions beyond the `keep` most recent (the highest numbers: pushes only count up), less `protect`.

    >>> retirees({"1": {}, "2": {}, "3": {}, "5": {}, "6": {}}, 2, {1})
    [2, 3]
    """
    numbers = sorted((int(number) for number in history), reverse=True)
    return sorted(number for number in numbers[keep:] if number not in protect)


def retired(served: Served) -> set[int]:
    return set((served.record or {}).get(RETIRED) or [])


def still_served(now: Served, version: int) -> Served:
    """`now`, unless `version` was retired meanwhile (ServingChanged: its folder is being removed)."""
    if version in retired(now):
        raise ServingChanged(f"version {version} was retired (clean-serving --keep) meanwhile: not served again")
    return now


def retire_versions(serving_dir: str, keep: int, protect: set[int] = frozenset()) -> list[int]:
    """Retires the versions `retirees` names (one compare-and-swap of the pointer), then removes the folder of every
    retired version still there (a killed clean's too); the versions removed now."""
    for _ in range(RETIRE_ATTEMPTS):
        served = read_served(serving_dir)
        if served.pointer is None:
            return []
        history = served_history(serving_dir, served)
        gone = retirees(history, keep, set(protect) | protected_versions(serving_dir) | {served.version})
        if not gone:
            break
        record = {**served.record, "served_versions": {n: e for n, e in history.items() if int(n) not in gone},
                  RETIRED: sorted(retired(served) | set(gone))}
        try:
            write_record(serving_dir, served, record)
            break
        except storage.WriteConflict:
            continue
    else:
        raise storage.WriteConflict(f"the pointer of {serving_dir} kept changing ({RETIRE_ATTEMPTS} attempts)")
    present = {int(name) for name in storage.list_names(serving_dir) if name.isdigit()}
    removed = sorted(retired(read_served(serving_dir)) & present)
    for number in removed:
        remove_version(version_folder(serving_dir, number))
    return removed
