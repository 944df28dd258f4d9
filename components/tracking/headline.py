"""The parent run as a person compares pipeline runs in MLflow's runs table, without expanding them: the
evaluation's metrics, the verdict and the version served as the parent's metrics, the main options as its
params, and the data as MLflow dataset inputs (the Dataset column). Read from the nested runs and the step
outputs records.py already holds; no MLflow here.

- metrics: the evaluate step's (overall metrics, their interval bounds, `blessed` 1/0, label issues) and
  `served_version` (the version this run's push served);
- params: the train and evaluate steps' options as `train.epochs`, `evaluate.thresholds`, ...; ExampleGen's
  data root and split weights; `data.index.<split>`: each index file. An option naming a run's folder (the
  examples it read, its output) differs in every run and compares nothing: left to the nested run;
- datasets: one per index file, `source` its URI, `digest` the data fingerprint (MLflow keeps 36
  characters: the whole fingerprint is in the profile), context its split.

>>> served_version({"push": {"Output": "/runs/digits/serving/3"}})
3.0
>>> source_type("hdfs://namenode/data/train.csv"), source_type("/data/train.csv")
('hdfs', 'local')
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable

from ..core import storage
from ..core.uri import scheme
from ..core.run_layout import JOB_NAME
from .step_figures import component_records

PARAM_STEPS = ("train", "evaluate")  # whose options (all but a run's folders) are the run's main params
DATA_OPTIONS = ("data_root", "split_weights")  # ExampleGen's options among them
DIGEST_LENGTH = 36  # MLflow's limit on a dataset's digest (utils/validation.py: MAX_DATASET_DIGEST_SIZE)
MAX_VERDICT = 5000


@dataclass(frozen=True)
class DataInput:
    """One MLflow dataset input: what the runs table's Dataset column shows (name, digest, context)."""

    name: str
    digest: str
    source_type: str
    source: str  # JSON: {"uri": ...}, as MLflow's own dataset sources write it
    context: str  # the split: MLflow's `mlflow.data.context` tag
    profile: str  # JSON


def headline_params(nested: Iterable[Any]) -> dict[str, str]:
    """{"train.epochs": "3", "evaluate.thresholds": ..., "data_root": ...} from the nested runs' params."""
    params: dict[str, str] = {}
    for run in nested:
        if run.name in PARAM_STEPS:
            params.update({f"{run.name}.{key}": value for key, value in run.params.items()
                           if not JOB_NAME.search(value)})
        elif run.name == "example-gen":
            params.update({key: run.params[key] for key in DATA_OPTIONS if key in run.params})
    return params


def headline_metrics(nested: Iterable[Any], outputs: dict[str, dict[str, Any]]) -> list[tuple[str, float]]:
    """The evaluation's metrics (the last value of each, step 0) and `served_version`."""
    found = [(m.key, m.value) for run in nested if run.name == "evaluate" for m in run.metrics if m.step == 0]
    version = served_version(outputs)
    return found + ([("served_version", version)] if version is not None else [])


def headline_tags(outputs: dict[str, dict[str, Any]]) -> dict[str, str]:
    """`shardflow.blessed` and `shardflow.verdict` (the evaluation's reasons), `shardflow.served_version`."""
    tags = {}
    evaluation = (outputs.get("evaluate") or {}).get("evaluation")
    uri = evaluation.get("uri") if isinstance(evaluation, dict) else None
    blessing = storage.join(uri, "blessing.json") if uri else None
    if blessing and storage.is_file(blessing):
        found = storage.read_json(blessing)
        tags["shardflow.blessed"] = str(bool(found.get("blessed"))).lower()
        tags["shardflow.verdict"] = "; ".join(found.get("reasons") or [])[:MAX_VERDICT]
    version = served_version(outputs)
    if version is not None:
        tags["shardflow.served_version"] = str(int(version))
    return tags


def served_version(outputs: dict[str, dict[str, Any]]) -> float | None:
    """The serving version this run's push named (its version folder's number), None when it pushed nothing."""
    pushed = (outputs.get("push") or {}).get("Output")
    name = str(pushed).rstrip("/").rsplit("/", 1)[-1] if isinstance(pushed, str) else ""
    return float(name) if name.isdigit() else None


def data_inputs(outputs: dict[str, dict[str, Any]], fingerprint: str | None) -> tuple[DataInput, ...]:
    """One dataset per index file ExampleGen read (its manifest's `inputs`), digest the data fingerprint."""
    if not fingerprint:
        return ()
    found = []
    for record in component_records(outputs.get("example-gen") or {}):
        splits = record.get("splits") or {}
        for given in record.get("inputs") or []:
            path, split = str(given.get("path") or ""), str(given.get("split") or "")
            if not path:
                continue
            profile = {"fingerprint": fingerprint, "index_sha256": given.get("sha256"),
                       "num_examples": (splits.get(split) or {}).get("num_examples")}
            found.append(DataInput(name=path.rstrip("/").rsplit("/", 1)[-1], digest=fingerprint[:DIGEST_LENGTH],
                                   source_type=source_type(path), source=json.dumps({"uri": path}),
                                   context=split, profile=json.dumps(profile, sort_keys=True)))
    return tuple(found)


def source_type(uri: str) -> str:
    """MLflow's dataset source type: the URI's scheme, `local` for a path."""
    return scheme(uri) or "local"
