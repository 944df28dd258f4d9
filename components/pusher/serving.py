"""The serving directory under concurrent pushes: its pointer read with a token, version numbers claimed
once, and the pointer moved by a compare-and-swap (`storage.write_if`), never by a plain write.

    served = read_served("runs/serving")          # CURRENT.json (or None) and its token
    check_gated(served, "/abs/runs/serving/3")     # ServingChanged unless that is what is served
    version = claim_version("runs/serving", "/abs/runs/train/model")   # 4: `.claims/4` created exclusively
    swap_pointer("runs/serving", served, {"version": 4, ...}, "/abs/runs/serving/3")

A version number is taken by creating `<serving_dir>/.claims/<N>` only if it does not exist (an exclusive
create on every scheme), so two racing pushes never both write `<N>/`; a number whose push was refused or
killed stays taken and is skipped. TF Serving ignores `.claims/` (it serves integer-named directories).
"""
from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass
from typing import Any

from ..core import storage
from ..core.errors import ShardflowError
from ..evaluator.config import NO_BASELINE
from .config import ServingChanged

SERVING_POINTER = "CURRENT.json"
CLAIMS = ".claims"
CLAIM_ATTEMPTS = 1000  # numbers tried past the highest one seen: others claiming them all is not a race


@dataclass(frozen=True)
class Served:
    """CURRENT.json as read (None: nothing was pushed yet) and the token of that version of it."""

    pointer: dict[str, Any] | None
    token: str | None


def read_served(serving_dir: str) -> Served:
    data, token = storage.read_with_token(storage.join(serving_dir, SERVING_POINTER))
    return Served(None if data is None else json.loads(data), token)


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


def check_unchanged(serving_dir: str, served: Served, gated_against: str | None) -> None:
    """ServingChanged when CURRENT.json is no longer the version `served` read (a cheap look before publishing)."""
    now = read_served(serving_dir)
    if now.token != served.token:
        raise refusal(now.pointer, gated_against)


def claim_version(serving_dir: str, origin: str) -> int:
    """The next version number, taken for this push alone: `.claims/<N>` created only if absent."""
    claims = storage.join(serving_dir, CLAIMS)
    taken = [int(name) for folder in (serving_dir, claims) for name in storage.list_names(folder) if name.isdigit()]
    version = max(taken, default=0) + 1
    record = {"model": origin, "claimed_at": _now(), "claim": uuid.uuid4().hex}  # unique: write_if knows its own
    for number in range(version, version + CLAIM_ATTEMPTS):
        try:
            storage.write_if(storage.join(claims, str(number)), _encoded(record), None)
            return number
        except storage.WriteConflict:
            continue  # another push took it first: the next one
    raise ShardflowError(f"could not claim a version in {serving_dir}: {CLAIM_ATTEMPTS} numbers from {version} "
                         f"are claimed (see {claims})")


def swap_pointer(serving_dir: str, served: Served, pointer: dict[str, Any], gated_against: str | None) -> None:
    """Replaces CURRENT.json by `pointer` only if it is still the version `served` read; else ServingChanged."""
    try:
        storage.write_if(storage.join(serving_dir, SERVING_POINTER), _encoded(pointer), served.token)
    except storage.WriteConflict:
        raise refusal(read_served(serving_dir).pointer, gated_against) from None


def _encoded(record: dict[str, Any]) -> bytes:
    return (json.dumps(record, indent=2, sort_keys=True) + "\n").encode("utf-8")  # as storage.write_json


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
