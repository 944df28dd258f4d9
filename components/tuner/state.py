"""KerasTuner's state under `TOUT/oracle/` survives a kill at any moment (KerasTuner 1.3.5, the pinned version).

KerasTuner keeps `oracle.json` (which trials started, ended or wait for a retry; the random state),
`trial_<id>/trial.json` (a trial's values, status and score) and `tuner0.json`, and rewrites them at
every step of a trial. Three rules make any kill leave a state that a rerun goes on from:

- Every write is whole or absent (`write_whole`). KerasTuner writes all three through one function,
  `Stateful.save`, which opens the file for writing (emptying it) and then writes: a kill in between
  left an empty or cut file, and the rerun failed reading it.
- A state damaged that way by an earlier version is reset (`reset_if_damaged`): the search starts
  again with the same seed, so the oracle draws the same trials in the same order, and every trial
  trained to its end is taken from its output (`executor.finished_trial`), not trained again.
- A trial that oracle.json does not list is forgotten on reload (`forget_unlisted`): a kill between a
  new trial's trial.json and the oracle.json that lists it left a RUNNING trial nobody would run. The
  oracle's random state was saved before that draw, so it draws the same values under the same id.

>>> import json, tempfile
>>> root = tempfile.mkdtemp()
>>> storage.write_json(storage.join(root, "trial_0", "trial.json"), {"trial_id": "0"})
>>> storage.write_text(storage.join(root, "oracle.json"), '{"ongoing_trials": {"tun')
>>> storage.relative_to(damaged_file(root), root)
'oracle.json'
>>> reset_if_damaged(root, print)  # doctest: +ELLIPSIS
tune: ...oracle.json is empty or cut short (...): the search starts again; ...
>>> storage.exists(root), damaged_file(root)
(False, None)
"""
from __future__ import annotations

import json
from typing import Any, Callable

from ..core import storage

ORACLE_FILE = "oracle.json"  # beside it: the tuner's own `<tuner id>.json` and a `trial_<id>/trial.json` per trial


def write_whole(kt: Any) -> None:
    """Makes KerasTuner's one state writer, `Stateful.save`, write whole or absent (the oracle, its
    trials and the tuner all inherit it). Process-wide: shardflow's tuner is KerasTuner's only user."""
    kt.engine.stateful.Stateful.save = _save_whole


def _save_whole(self: Any, fname: str) -> str:
    storage.write_text(str(fname), json.dumps(self.get_state()))  # KerasTuner's own serialization
    return str(fname)


def damaged_file(oracle_dir: str) -> str | None:
    """The first state file under `oracle_dir` that a rerun could not read (empty, cut short, or no
    oracle.json beside the tuner's file); None when the state is whole, or absent."""
    files = [f for f in storage.list_files(oracle_dir)
             if f.endswith(".json") and not storage.basename(f).startswith(".")]  # not a write's temporary
    for location in files:
        try:
            if isinstance(storage.read_json(location), dict):
                continue
        except (ValueError, UnicodeDecodeError):  # json's errors are ValueErrors
            pass
        return location
    if _tuner_files(oracle_dir) and not storage.exists(storage.join(oracle_dir, ORACLE_FILE)):
        return storage.join(oracle_dir, ORACLE_FILE)
    return None


def reset_if_damaged(oracle_dir: str, echo: Callable[[str], None]) -> None:
    """Removes a damaged state (see the module's docstring), saying so in one line."""
    damaged = damaged_file(oracle_dir)
    if damaged is None:
        return
    echo(f"tune: {damaged} is empty or cut short (killed while an earlier version wrote it): the search "
         "starts again; trials trained to the end are taken from their outputs, not trained again")
    # The tuner's file first: without it KerasTuner starts afresh instead of reloading, so a kill
    # during the removal never leaves a half-removed state to reload.
    for name in (*_tuner_files(oracle_dir), ORACLE_FILE):
        storage.remove(storage.join(oracle_dir, name))
    storage.remove(oracle_dir)


def _tuner_files(oracle_dir: str) -> list[str]:
    return [n for n in storage.list_names(oracle_dir) if n.endswith(".json") and n != ORACLE_FILE]


def forget_unlisted(oracle: Any) -> None:
    """After a reload: drops the trials that oracle.json does not list (see the module's docstring).
    `start_order` lists every trial the oracle created, in the same save that recorded its draw."""
    listed = set(oracle.start_order)
    for trial_id in [t for t in oracle.trials if t not in listed]:
        del oracle.trials[trial_id]
