"""The serving directory under concurrent pushes: its pointer read with a token, version numbers claimed
once, and the pointer moved by a compare-and-swap (`storage.write_if`), never by a plain write.

    served = read_served("runs/serving")          # CURRENT.json (or None) and its token
    check_gated(served, "/abs/runs/serving/3")     # ServingChanged unless that is what is served
    version = claim_version("runs/serving", "/abs/runs/train/model")   # 4: `.claims/4` created exclusively
    swap_pointer("runs/serving", served, {"version": 4, ...}, "/abs/runs/serving/3")

A version number is taken by creating `<serving_dir>/.claims/<N>` only if it does not exist (an exclusive
create on every scheme), so two racing pushes never both write `<N>/`; a number whose push was refused or
killed stays taken and is skipped. TF Serving ignores `.claims/` (it serves integer-named directories).

The pointer also keeps what the clean-up needs to tell an orphan from a version that was served:
`served_versions` ({"N": {"content_digest", "pushed_from", "pushed_at"}} of every version a pointer ever named:
the rollback targets) and `abandoned_through` (every unserved claim up to that number is dead: its push can no
longer win). A pointer with `"version": null` is such a record while nothing is served yet.
"""
from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from ..core import storage
from ..core.errors import ShardflowError
from ..core.process_identity import process_identity
from ..evaluator.config import NO_BASELINE
from .config import ServingChanged
from .tf_serving import TfServing, publish_model_config

SERVING_POINTER = "CURRENT.json"
CLAIMS = ".claims"
CLAIM_ATTEMPTS = 1000  # numbers tried past the highest one seen: others claiming them all is not a race
KEPT_FIELDS = ("retired_versions",)  # the record's own fields a swap carries over (retention.py)


@dataclass(frozen=True)
class Served:
    """CURRENT.json as read: the pointer (None: nothing is served), the token of that version of the file, and
    the whole record (None: no file)."""

    pointer: dict[str, Any] | None
    token: str | None
    record: dict[str, Any] | None = None

    @property
    def version(self) -> int | None:
        return self.pointer["version"] if self.pointer else None

    @property
    def abandoned_through(self) -> int:
        return int((self.record or {}).get("abandoned_through") or 0)


def read_served(serving_dir: str) -> Served:
    data, token = storage.read_with_token(storage.join(serving_dir, SERVING_POINTER))
    record = None if data is None else json.loads(data)
    return Served(record if record and record.get("version") is not None else None, token, record)


def served_history(serving_dir: str, served: Served) -> dict[str, dict[str, Any]]:
    """{"N": record} of every version a pointer named. A pointer written by an older shardflow has no such list:
    every integer-named directory up to its version may have been served, so all of them count (none is removed)."""
    if served.record and "served_versions" in served.record:
        return dict(served.record["served_versions"])
    if not served.pointer:
        return {}
    return {name: {} for name in storage.list_names(serving_dir) if name.isdigit() and int(name) <= served.version}


def moved(before: Served, now: Served) -> bool:
    """Whether another model is served now than `before` (a clean-up's record of abandoned claims is no move)."""
    return before.version != now.version


def read_pointer(serving_dir: str) -> dict[str, Any] | None:
    """The content of CURRENT.json, or None when nothing was pushed to `serving_dir` yet."""
    return read_served(serving_dir).pointer


def normalized(location: str) -> str:
    """A location as compared: a URI as written (less a trailing '/'), a local path resolved."""
    return location.rstrip("/") if storage.is_remote(location) else os.path.realpath(location)


def names_gated(pointer: dict[str, Any] | None, gated_against: str | None) -> bool:
    """Whether `pointer` is what a candidate gated against `gated_against` may replace: the same model (its
    version directory, or the training output it was pushed from), or nothing for NO_BASELINE. None: anything."""
    if gated_against is None:
        return True
    if pointer is None or gated_against == NO_BASELINE:
        return pointer is None and gated_against == NO_BASELINE
    return normalized(gated_against) in {normalized(pointer["model"]), pointer.get("pushed_from")}


def refusal(pointer: dict[str, Any] | None, gated_against: str | None) -> ServingChanged:
    """The one line of a refused push: what is served now, and what the candidate was gated against."""
    served = f"{pointer['model']} (version {pointer['version']})" if pointer else "nothing"
    if names_gated(pointer, gated_against):  # the pointer moved and came back, or --replace any lost a race
        return ServingChanged(f"another push moved {SERVING_POINTER} while this one copied the model "
                              f"({served} is served now): push again")
    baseline = "none (nothing was served)" if gated_against == NO_BASELINE else gated_against
    return ServingChanged(f"{served} is served now, but the model was gated against {baseline}: evaluate it "
                          "against the served model, then push (a rerun of the pipeline does both)")


def check_gated(served: Served, gated_against: str | None) -> None:
    """ServingChanged unless `served` is what a candidate gated against `gated_against` may replace."""
    if not names_gated(served.pointer, gated_against):
        raise refusal(served.pointer, gated_against)


def check_unchanged(serving_dir: str, served: Served, gated_against: str | None, version: int) -> None:
    """ServingChanged when another model is served than `served` read, or claim `version` was abandoned (a cheap
    look before publishing)."""
    now = read_served(serving_dir)
    if moved(served, now) or version <= now.abandoned_through:
        raise refusal(now.pointer, gated_against)


def claim_version(serving_dir: str, origin: str, served: Served) -> int:
    """The next version number, taken for this push alone: `.claims/<N>` created only if absent; above every
    number an abandoned claim had (those can never win)."""
    claims = storage.join(serving_dir, CLAIMS)
    taken = [int(name) for folder in (serving_dir, claims) for name in storage.list_names(folder) if name.isdigit()]
    version = max(taken + [served.abandoned_through], default=0) + 1
    record = {"model": origin, "claimed_at": now_text(), "claim": uuid.uuid4().hex,  # unique: write_if knows its own
              "holder": process_identity()}  # a clean-up on this host sees at once that a killed push is gone
    for number in range(version, version + CLAIM_ATTEMPTS):
        try:
            storage.write_if(storage.join(claims, str(number)), _encoded(record), None)
            return number
        except storage.WriteConflict:
            continue  # another push took it first: the next one
    raise ShardflowError(f"could not claim a version in {serving_dir}: {CLAIM_ATTEMPTS} numbers from {version} "
                         f"are claimed (see {claims})")


def swap_pointer(serving_dir: str, served: Served, make_pointer: Callable[[Served], dict[str, Any]],
                 gated_against: str | None) -> dict[str, Any]:
    """Replaces CURRENT.json by `make_pointer(served)` only if it is still the version `served` read; the pointer
    written. When only the record changed meanwhile (a clean-up marked claims abandoned, not this one), the same
    model is still served: built and swapped again over the new record. Else ServingChanged."""
    location = storage.join(serving_dir, SERVING_POINTER)
    while True:
        pointer = make_pointer(served)
        try:
            storage.write_if(location, _encoded(pointer), served.token)
            return pointer
        except storage.WriteConflict:
            now = read_served(serving_dir)
            if moved(served, now) or pointer["version"] <= now.abandoned_through:
                raise refusal(now.pointer, gated_against) from None
            served = now


def successor(serving_dir: str, served: Served, record: dict[str, Any]) -> dict[str, Any]:
    """The pointer that replaces `served` by `record`'s version: what it replaced, when, and every version served."""
    history = served_history(serving_dir, served)
    entry = {key: record[key] for key in ("model", "storage_uri") if record.get(key)}
    history[str(record["version"])] = {"content_digest": record["content_digest"],
                                       "pushed_from": record["pushed_from"], "pushed_at": now_text(), **entry}
    return {**record, "replaced_version": served.version, "pushed_at": now_text(), "served_versions": history,
            "abandoned_through": served.abandoned_through, "serial": serial_of(served) + 1,
            **{key: served.record[key] for key in KEPT_FIELDS if served.record and key in served.record}}


def serial_of(served: Served) -> int:
    """The pointer's serial: one more at every swap of the served version (0: none yet, or an older shardflow's)."""
    return int((served.record or {}).get("serial") or 0)


def serve_pointer_version(serving_dir: str, tf_serving: TfServing) -> int | None:
    """TF Serving's model config made to serve the version CURRENT.json names now (tf_serving.py); that version."""
    return publish_model_config(serving_dir, tf_serving, lambda: read_served(serving_dir).pointer)


def write_record(serving_dir: str, served: Served, record: dict[str, Any]) -> Served:
    """CURRENT.json replaced by `record` only if it is still what `served` read (WriteConflict otherwise)."""
    data = _encoded(record)
    token = storage.write_if(storage.join(serving_dir, SERVING_POINTER), data, served.token)
    return Served(record if record.get("version") is not None else None, token, record)


def _encoded(record: dict[str, Any]) -> bytes:
    return (json.dumps(record, indent=2, sort_keys=True) + "\n").encode("utf-8")  # as storage.write_json


def now_text() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
