"""What each step's nested run holds: params, metrics, tags and artifacts, read from the step's outputs.

`outputs` is {name: {"uri", "metadata"} or a parameter's value}, as RUN/logs/steps.json records them;
`records`, the component records in them, read once per step (`component_records`).
- params: the options of the component record in an output (manifest.json, training.json, metrics.json,
  infra_validation.json: `options`, secrets already redacted by core/config_record.py), nested keys
  joined with ".";
- metrics: every number in every output's KFP metadata (what the KFP UI shows), nested keys joined
  with "."; and what the step's files hold besides: per-epoch training metrics as MLflow steps, the
  evaluation's interval bounds and label issues, near-duplicate pairs, anomalies;
- artifacts: the small files a person opens (SMALL_FILES), not shards, models or arrays: those are
  linked by their URIs in the `shardflow.output.*` tags.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable, Iterator

RECORDS = ("manifest.json", "training.json", "metrics.json", "infra_validation.json")
SMALL_SUFFIXES = {".json", ".jsonl", ".png", ".md", ".html", ".pbtxt", ".txt", ""}
# A file above this is linked, not uploaded: the largest a person opens here is a confusion matrix (94 kB on the
# digits) or near_duplicates.jsonl (361 kB for 1,329 pairs).
SMALL_FILE_BYTES = 1 << 20
_SKIPPED_FILES = {"executor_output.json", "BLESSED", "INFRA_BLESSED"}
_KEY = re.compile(r"[^\w\-. /]")  # what MLflow accepts in a metric's or param's name


def step_params(records: list[dict[str, Any]]) -> dict[str, str]:
    options: dict[str, Any] = {}
    for record in records:
        options.update(record.get("options") or {})
    return {key: value if isinstance(value, str) else json.dumps(value) for key, value in _flat(options)}


def step_metrics(task: str, outputs: dict[str, Any], records: list[dict[str, Any]],
                 metric: Callable[..., Any]) -> list[Any]:
    found = {key: float(value) for name, value in outputs.items() if isinstance(value, dict)
             for key, value in _flat(value.get("metadata") or {}) if _is_number(value)}
    found.update({key: float(value) for key, value in outputs.items() if _is_number(value)})
    per_epoch = _history(outputs) if task == "train" else []
    by_epoch = {entry_key for entry in per_epoch for entry_key in entry if entry_key != "epoch"}
    metrics = [metric(key, value) for key, value in found.items() if key not in by_epoch]
    metrics += [metric(key, float(value), int(entry["epoch"])) for entry in per_epoch
                for key, value in entry.items() if key != "epoch" and _is_number(value)]
    metrics += [metric(key, value) for key, value in _extras(outputs, records).items()]
    return metrics


def step_tags(outputs: dict[str, Any], records: list[dict[str, Any]]) -> dict[str, str]:
    tags = {}
    for record in records:
        if record.get("shardflow_version"):
            tags["shardflow.version"] = str(record["shardflow_version"])
        if "gated_against" in record:
            tags["shardflow.gated_against"] = str(record["gated_against"])
    blessed = outputs.get("blessed")
    if isinstance(blessed, bool):
        tags["shardflow.blessed"] = str(blessed).lower()
    return tags


def step_artifacts(outputs: dict[str, Any]) -> Iterator[str]:
    for value in outputs.values():
        path = Path(value["uri"]) if isinstance(value, dict) and value.get("uri") else None
        if path is None or "://" in value["uri"]:
            continue
        files = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path] if path.is_file() else []
        companion = path.with_name(path.name + ".d")  # the validation report's folder beside its file
        files += sorted(p for p in companion.iterdir() if p.is_file()) if companion.is_dir() else []
        for file in files:
            if (file.suffix in SMALL_SUFFIXES and file.name not in _SKIPPED_FILES
                    and 0 < file.stat().st_size <= SMALL_FILE_BYTES):
                yield str(file)


def component_records(outputs: dict[str, Any]) -> list[dict[str, Any]]:
    """The component records (RECORDS: JSON with a "component") in the step's local output folders."""
    found = []
    for value in outputs.values():
        uri = value.get("uri") if isinstance(value, dict) else None
        if not uri or "://" in uri or not Path(uri).is_dir():
            continue
        for name in RECORDS:
            path = Path(uri) / name
            if path.is_file():
                record = json.loads(path.read_text())
                if isinstance(record, dict) and "component" in record:
                    found.append(record)
    return found


def _history(outputs: dict[str, Any]) -> list[dict[str, Any]]:
    for value in outputs.values():
        uri = value.get("uri") if isinstance(value, dict) else None
        path = Path(uri or "") / "history.json"
        if uri and "://" not in uri and path.is_file():
            return list(json.loads(path.read_text()).get("epochs") or [])
    return []


def _extras(outputs: dict[str, Any], records: list[dict[str, Any]]) -> dict[str, float]:
    """The numbers a step's files hold beyond its KFP metadata."""
    extras: dict[str, float] = {}
    for record in records:
        if record.get("component") == "evaluator":
            for name, (low, high) in ((record.get("intervals") or {}).get("candidate") or {}).items():
                extras[f"{name}.lower"], extras[f"{name}.upper"] = low, high
            if isinstance(record.get("label_issues"), dict) and _is_number(record["label_issues"].get("count")):
                extras["label_issues"] = record["label_issues"]["count"]
        if record.get("component") == "example_gen":
            for name in ("near_duplicates", "leakage"):
                if isinstance(record.get(name), dict) and _is_number(record[name].get("count")):
                    extras[f"{name}"] = record[name]["count"]
    for value in outputs.values():
        uri = value.get("uri") if isinstance(value, dict) else None
        anomalies = Path(f"{uri}.d") / "anomalies.json"
        if uri and "://" not in uri and anomalies.is_file():
            extras["anomalies"] = json.loads(anomalies.read_text()).get("num_anomalies", 0)
    return {key: float(value) for key, value in extras.items() if _is_number(value)}


def _flat(values: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in values.items():
        name = _KEY.sub("_", f"{prefix}{key}")
        if isinstance(value, dict) and value:
            yield from _flat(value, name + ".")
        else:
            yield name, value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float))  # a bool too: blessed 1.0 or 0.0
