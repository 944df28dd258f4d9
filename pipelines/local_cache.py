"""Step caching for `shardflow run`, keyed as KFP keys its cache on a cluster.

A cluster's KFP reuses a task's earlier outputs when its cache
key is unchanged: the component (its code and image), its input parameters and its input
artifacts. This does the same on one machine. A step's key is a SHA-256 over

- the compiled component and executor spec (the step's code as KFP ships it, its command, image);
- the shardflow code that step runs (every source file of the installed package: `code_fingerprint`)
  and the versions of the frameworks it calls;
- its input parameters (a changed CSV changes the data fingerprint, an input of ExampleGen);
- its input artifacts by URI: an upstream step that re-ran wrote new URIs, so everything
  downstream of a change runs again. One exception (`CONTENT_KEYED`): infra-validate reads only the
  Evaluator's canaries and their probabilities from its evaluation, so that input is keyed by those
  files' bytes: for the same model and examples the Evaluator keeps the same canaries, so a rerun whose
  Evaluator ran again does not load, time and write the warm-up file again.
- Its model references (`RESOLVED`) by the model they name now, not by their words: the Evaluator's
  `baseline` "latest" by the serving directory's CURRENT.json (every push rewrites it: a new version, its
  time) and the served model's identity files (`model_identity`), a path by that model's identity files.
  KFP would key the word "latest", and reuse an evaluation after another run pushed; so the Evaluator is
  cached by this cache only (its IR has caching off): an identical rerun with the same candidate and the
  same served model reuses its outputs, and another run's push in between is a miss. A served version pushed
  from the candidate itself names no baseline (the step resolves it so: a model is not gated against itself),
  so the identical rerun of a run that pushed reuses that run's evaluation.

A hit reuses the outputs in place (no copy: the run directory gets symbolic links to them), so an
identical rerun adds only its small reports. Only steps the pipeline marks cacheable (the step
table's `cacheable`: ExampleGen, validation, Transform, Tuner, Trainer, infra-validate) and the steps in
`RESOLVED` (the Evaluator) are looked up (`keyed`); the report and Push always run. A cached
output that has gone (deleted by hand) is a miss. `no_cache` names steps never to reuse ("all": none,
the Evaluator included).

Two runs into one RUN_DIR share the cache. An entry is written whole (storage.write_json: a uniquely named
temporary file renamed over it), so when both store one entry at once a lookup finds either run's whole
entry or none, never a part (tests/pipeline/test_cache_concurrent_writes.py).

    cache = StepCache(Path("runs/demo/cache"), no_cache=frozenset({"train"}))
    key = cache.key("transform", component_spec, executor_spec, arguments)
    cache.lookup("transform", key)          # the outputs dict, or None

A killed task is retried with its backups, as a cluster's retry keeps its output URI. Every run of a keyed
task is recorded as an attempt (`cache/attempts/<task>-<key>.json`: its output URIs) until it succeeds.
A rerun with the same key first copies what an unfinished earlier attempt left to resume from
(`RESUMABLE`: the Trainer's `checkpoints/` and `history.json`, in an output without `training.json`)
into its own outputs, so the step resumes. A task under `--no-cache` has no key, so it starts afresh.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import storage
from ..core.errors import ConfigError
from ..core.model_info import files_digest, model_digest
from ..evaluator.config import CANARIES, CANARY_PREDICTIONS
from ..pusher import LATEST, read_pointer, served_model_for
from ..trainer.outputs import CHECKPOINTS, HISTORY_NAME, MODEL, SUMMARY_NAME
from .local_dag import output_from_record, output_record
from .steps import STEPS

CACHE_DIR = "cache"
# The steps whose outputs can be reused (the pipeline's cacheable tasks), named as `--no-cache` takes them.
CACHEABLE_STEPS = tuple(step.name for step in STEPS if step.cacheable)
# {step: {input artifact: files in it}}: inputs keyed by the bytes of the files the step reads, not by URI.
CONTENT_KEYED = {"infra-validate": {"evaluation": (CANARIES, CANARY_PREDICTIONS)}}
# {step: (a model reference parameter, the serving directory parameter, the candidate model input)}: keyed by
# the model the reference names now for that candidate (pusher's resolve_model_reference, as the step resolves it).
RESOLVED = {"evaluate": ("baseline", "serving_dir", "model")}
# Artifacts that live in KFP's metadata only: no file is ever written at their URI.
_METADATA_ONLY = frozenset({"system.Metrics", "system.ClassificationMetrics", "system.SlicedClassificationMetrics"})
ATTEMPTS_DIR = "attempts"
# What an unfinished output leaves to resume from (the Trainer's backups and its epochs so far), and the
# marker of a finished one (the Trainer's training.json): named here, as the trainer is not imported here.
RESUMABLE = (CHECKPOINTS, HISTORY_NAME)
FINISHED_MARKER = SUMMARY_NAME
_FRAMEWORKS = ("tensorflow", "tf-keras", "apache-beam", "tensorflow-transform", "tensorflow-data-validation", "kfp")


def check_no_cache(steps: tuple[str, ...]) -> frozenset[str]:
    """The `--no-cache` values as a set; ConfigError naming a step that is not cacheable.

    >>> sorted(check_no_cache(("train", "transform")))
    ['train', 'transform']
    """
    unknown = [step for step in steps if step != "all" and step not in CACHEABLE_STEPS]
    if unknown:
        raise ConfigError(f"no_cache {unknown[0]!r} is not a cached step (cached: {', '.join(CACHEABLE_STEPS)}; "
                          "or 'all')")
    return frozenset(steps)


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """SHA-256 over shardflow's source files and the framework versions: a code change invalidates the cache."""
    import shardflow
    import shardflow.pipelines

    digest = hashlib.sha256(sys.version.encode())
    for name in _FRAMEWORKS:
        digest.update(f"{name}={importlib.metadata.version(name)}".encode())
    roots = sorted({Path(shardflow.__file__).parent, Path(shardflow.pipelines.__file__).parent})
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _identity(value: Any) -> Any:
    """An input argument as it enters the key: an artifact by type and URI, a parameter as itself."""
    if hasattr(value, "uri") and hasattr(value, "schema_title"):
        return {"artifact": value.schema_title, "uri": value.uri}
    raise TypeError(f"cannot key an argument of type {type(value).__name__}")


def model_identity(reference: str, serving_dir: str, candidate: str = "") -> dict[str, Any]:
    """What a model reference (`latest`, a location, or '') names now for `candidate`, as the step resolves it
    (pusher's resolve_model_reference, from one read of the pointer): the served pointer for `latest`, and the
    model's location and content (model_info.model_digest); {"model": None} when it names none, or names the
    candidate's own push."""
    pointer = read_pointer(serving_dir) if reference == LATEST and serving_dir else None
    location = served_model_for(pointer, candidate) if reference == LATEST else reference
    if not location:
        return {"model": None}
    return {"pointer": pointer, "model": location, "files": model_digest(location)}


def _keyed(task: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """`arguments` with the CONTENT_KEYED inputs of `task` replaced by the SHA-256 of the files read from them,
    and its RESOLVED model reference by the model it names now."""
    keyed = dict(arguments)
    for name, files in CONTENT_KEYED.get(task, {}).items():
        if name in keyed:
            keyed[name] = {"artifact": keyed[name].schema_title, "content": files_digest(keyed[name].uri, files)}
    if task in RESOLVED:
        reference, serving_dir, model = RESOLVED[task]
        candidate = os.path.join(keyed[model].uri, MODEL) if model in keyed else ""
        keyed[reference] = model_identity(keyed.get(reference) or "", keyed.get(serving_dir) or "", candidate)
    return keyed


@dataclass(frozen=True)
class StepCache:
    """The cache of one run directory (`root`: RUN_DIR/cache); `no_cache`: steps never reused, or {'all'}."""

    root: Path
    no_cache: frozenset[str] = field(default_factory=frozenset)

    def enabled_for(self, task: str) -> bool:
        return "all" not in self.no_cache and task not in self.no_cache

    def keyed(self, task: str, spec: dict[str, Any]) -> bool:
        """Whether the task (`spec`: its entry in the compiled DAG) is looked up: its IR enables KFP's cache, or
        only this cache can key it (RESOLVED); and `no_cache` does not name it."""
        cached = spec.get("cachingOptions", {}).get("enableCache") or task in RESOLVED
        return bool(cached) and self.enabled_for(task)

    def key(self, task: str, component_spec: dict, executor_spec: dict, arguments: dict[str, Any]) -> str:
        """`component_spec`, `executor_spec`: the task's entries in the compiled pipeline (IR as a dict)."""
        digest = hashlib.sha256(task.encode() + b"\0" + code_fingerprint().encode())
        digest.update(json.dumps([component_spec, executor_spec], sort_keys=True).encode())
        digest.update(json.dumps(_keyed(task, arguments), sort_keys=True, default=_identity).encode())
        return digest.hexdigest()

    def _entry(self, task: str, key: str) -> Path:
        return self.root / task / f"{key}.json"

    def lookup(self, task: str, key: str) -> dict[str, Any] | None:
        """The outputs a successful earlier run of this step left, when every artifact of them still exists."""
        entry = self._entry(task, key)
        if not entry.is_file():
            return None
        saved = json.loads(entry.read_text())
        if not all(os.path.exists(a["uri"]) for a in saved["outputs"].values()
                   if "uri" in a and a["schema_title"] not in _METADATA_ONLY):
            return None
        return {name: output_from_record(value) for name, value in saved["outputs"].items()}

    def store(self, task: str, key: str, outputs: dict[str, Any], task_root: Path) -> None:
        """Records a successful run's outputs (atomically: a killed run leaves no half entry)."""
        record = {"task_root": str(task_root), "outputs": {name: output_record(v) for name, v in outputs.items()}}
        storage.write_json(str(self._entry(task, key)), record)

    def _attempt(self, task: str, key: str) -> str:
        return str(self.root / ATTEMPTS_DIR / f"{task}-{key}.json")

    def start_attempt(self, task: str, key: str, outputs: dict[str, str]) -> str | None:
        """Records this attempt at `outputs` ({name: URI}), having first copied into them what an unfinished
        earlier attempt with this key left; returns the output it resumed from, or None."""
        attempt = self._attempt(task, key)
        earlier = storage.read_json(attempt)["outputs"] if storage.is_file(attempt) else {}
        resumed = None
        for name, uri in outputs.items():
            if earlier.get(name) not in (None, uri) and carry_backups(earlier[name], uri):
                resumed = earlier[name]
        # Written after the copy: a rerun killed while copying still finds the attempt that holds the backups.
        storage.write_json(attempt, {"task": task, "key": key, "outputs": outputs})
        return resumed

    def end_attempt(self, task: str, key: str) -> None:
        """The attempt succeeded: nothing of it is to be resumed."""
        attempt = self._attempt(task, key)
        if storage.is_file(attempt):
            storage.remove(attempt)


def carry_backups(source: str, target: str) -> bool:
    """Copies `RESUMABLE` from an unfinished output `source` into `target`, each whole or absent (staged, then
    moved into place); False when `source` is finished or has no backups."""
    if not storage.is_dir(storage.join(source, RESUMABLE[0])) or storage.exists(storage.join(source, FINISHED_MARKER)):
        return False
    for name in RESUMABLE:
        found, staged = storage.join(source, name), storage.temp_name(storage.join(target, name))
        if storage.is_file(found):
            storage.copy_file(found, storage.join(target, name))
        elif storage.is_dir(found):
            storage.copy_tree(found, staged)
            storage.move(staged, storage.join(target, name))
    return True


def link_outputs(outputs: dict[str, Any], task_root: Path) -> None:
    """Symbolic links in this run's task folder to the reused outputs, so the run directory reads as complete."""
    task_root.mkdir(parents=True, exist_ok=True)
    for value in outputs.values():
        uri = getattr(value, "uri", None)
        if uri and os.path.exists(uri):
            link = task_root / os.path.basename(uri)
            if not link.exists():
                link.symlink_to(uri, target_is_directory=os.path.isdir(uri))
