"""What killed pushes leave in a serving directory, found and removed by the next push (or `shardflow
clean-serving`), never by hand, and never a version a pointer named.

A push claims `.claims/<N>`, copies into `<N>/` (locally into a hidden `.<N>.tmp-…` renamed to `<N>`), then swaps
the pointer. Killed before the swap, it leaves a claim, and maybe a copy, that no pointer names. A claim is dead
when its process is known gone (on this host) or it is older than `stale_after` seconds (another host's).

Removing a copy is safe only if its push can no longer win, and only the pointer's compare-and-swap can
promise that: the clean-up first raises the pointer's `abandoned_through` to the highest number below which
every unserved claim is dead (one compare-and-swap; a push numbered at or below it is refused at its own
swap), then removes those claims, their copies and staging folders. Versions in `served_versions` (every
version a pointer ever named: the rollback targets) and the one served now are never touched.

    served, removed = clean_serving_dir("runs/serving", read_served("runs/serving"), stale_after=3600)
"""
from __future__ import annotations

import calendar
import re
import time
from typing import Any

from ..core import storage
from ..core.process_identity import process_gone
from .layout import SAVED_MODEL
from .serving import CLAIMS, Served, read_served, served_history, write_record

STAGING = re.compile(r"^\.(\d+)\.tmp-")  # storage.temp_name of a version directory: `.<N>.tmp-<hex>`
MARK_ATTEMPTS = 20  # a conflict means a push or another clean-up moved the pointer: read it again


def claim_is_dead(claim: dict[str, Any], stale_after: float, now: float) -> bool:
    """Whether the push that wrote `claim` can be taken for dead: its process is gone (this host) or the claim is
    older than `stale_after` seconds.

    >>> claim_is_dead({"claimed_at": "2026-11-28T10:00:00Z"}, 3600, calendar.timegm((2026, 11, 28, 10, 30, 0)))
    False
    >>> claim_is_dead({"claimed_at": "2026-11-28T10:00:00Z"}, 600, calendar.timegm((2026, 11, 28, 10, 30, 0)))
    True
    """
    if process_gone(claim.get("holder")):
        return True
    try:
        claimed = calendar.timegm(time.strptime(str(claim.get("claimed_at")), "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        return True  # no readable time: not a claim any push of ours wrote
    return now - claimed > stale_after


def _dead_through(serving_dir: str, served: Served, kept: set[int], stale_after: float) -> int:
    """The highest claim number at or below which every unserved claim is dead (at least the recorded mark)."""
    claims = storage.join(serving_dir, CLAIMS)
    mark, now = served.abandoned_through, time.time()
    numbers = sorted(int(name) for name in storage.list_names(claims) if name.isdigit())
    for number in (n for n in numbers if n > mark and n not in kept):
        try:
            claim = storage.read_json(storage.join(claims, str(number)))
        except FileNotFoundError:
            continue  # removed by another clean-up meanwhile
        if not claim_is_dead(claim, stale_after, now):
            break  # a live push: nothing above it is marked (a later clean-up will)
        mark = number
    return mark


def _kept(serving_dir: str, served: Served) -> tuple[dict[str, Any], set[int]]:
    history = served_history(serving_dir, served)
    return history, {int(n) for n in history} | ({served.version} if served.version else set())


def _mark_abandoned(serving_dir: str, served: Served, stale_after: float) -> Served:
    """The pointer with `abandoned_through` raised over every dead claim (one compare-and-swap), as read after."""
    for _ in range(MARK_ATTEMPTS):
        history, kept = _kept(serving_dir, served)
        mark = _dead_through(serving_dir, served, kept, stale_after)
        if mark <= served.abandoned_through:
            return served
        record = {**(served.record or {"version": None}), "served_versions": history, "abandoned_through": mark}
        try:
            return write_record(serving_dir, served, record)
        except storage.WriteConflict:
            served = read_served(serving_dir)
    return served  # contended all along: the next push cleans up


def _remove_abandoned(serving_dir: str, served: Served) -> list[str]:
    """Removes the claims, copies and staging folders numbered at or below the mark that no pointer named."""
    _, kept = _kept(serving_dir, served)
    mark, claims, removed = served.abandoned_through, storage.join(serving_dir, CLAIMS), []
    for folder in (serving_dir, claims):
        for name in storage.list_names(folder):
            staged = STAGING.match(name) if folder == serving_dir else None
            number = int(name) if name.isdigit() else int(staged.group(1)) if staged else None
            if number is not None and number <= mark and number not in kept:
                remove_version(storage.join(folder, name))
                removed.append(storage.join(folder, name))
    return removed


def remove_version(location: str) -> None:
    """Removes a version's folder (or a claim), whole or not looking whole: every `saved_model.pb` first (a push
    copies it last, and without it TF Serving and KServe's rule find no model), then the rest."""
    if storage.is_dir(location):
        for path in storage.list_files(location):
            if storage.basename(path) == SAVED_MODEL:
                storage.remove(path)
    storage.remove(location)


def clean_serving_dir(serving_dir: str, served: Served, stale_after: float) -> tuple[Served, list[str]]:
    """Marks dead claims abandoned, then removes what they left; (the pointer as read after, what was removed)."""
    served = _mark_abandoned(serving_dir, served, stale_after)
    return served, _remove_abandoned(serving_dir, served)
