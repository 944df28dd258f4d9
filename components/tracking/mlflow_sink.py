"""The one place shardflow writes to MLflow: runs sent idempotently, and a step logged into a given run.

A run is found again by its KEY_TAG (the job's name, or job/step). One whose COMPLETE_TAG is set was sent
whole and is left as it is; one without it (a send cut off) is deleted with its job's other runs and sent
again, so sending twice, or after a failure, leaves the server holding exactly what one uninterrupted
send would. MLflow is imported here only, when something is sent (1.2 s: `preload` starts it early).

    sink = MlflowSink("http://127.0.0.1:5000")
    parent_id, sent = sink.send_run(sink.experiment("runs-digits"), records)
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Iterator

from ..core.errors import ConfigError, ShardflowError
from .records import JOB_TAG, KEY_TAG, RunRecords, TrackedRun

COMPLETE_TAG = "shardflow.complete"
# MLflow's log_batch limits (docs: REST API, LogBatch): 1000 metrics, 100 params, 100 tags a request.
BATCH = {"metrics": 1000, "params": 100, "tags": 100}
REACH_SECONDS = 5.0


def preload() -> threading.Thread:
    """Imports MLflow's client in a thread: a run that tracks pays its 1.2 s while its steps run."""
    thread = threading.Thread(target=lambda: __import__("mlflow.tracking"), daemon=True)
    thread.start()
    return thread


def check_reachable(uri: str) -> None:
    """ConfigError in one line when the tracking server cannot be reached (http, https) or the file store's
    folder cannot be made (file: or a path); other schemes (databricks, ...) are left to the client."""
    if uri.startswith(("http://", "https://")):
        try:
            urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=REACH_SECONDS).read()
        except (urllib.error.URLError, OSError) as error:
            raise ConfigError(f"tracking server {uri} cannot be reached: {getattr(error, 'reason', error)}") from None
    elif uri.startswith(("file:", "sqlite:")) or "://" not in uri:
        path = Path(uri.removeprefix("sqlite:///").removeprefix("file://").removeprefix("file:"))
        folder = path.parent if uri.startswith("sqlite:") else path
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ConfigError(f"tracking store {uri}: {error.strerror}") from None


@contextlib.contextmanager
def sink_errors(uri: str) -> Iterator[None]:
    """What the tracking server or store refused, as one line (ShardflowError, exit 1), not a traceback."""
    from mlflow.exceptions import MlflowException
    from requests.exceptions import RequestException

    try:
        yield
    except (MlflowException, RequestException) as error:
        raise ShardflowError(f"tracking {uri}: {str(error).splitlines()[0][:300]}") from error


class MlflowSink:
    def __init__(self, tracking_uri: str, registry_uri: str | None = None) -> None:
        import mlflow
        from mlflow.tracking import MlflowClient

        if tracking_uri.startswith("file:"):  # given by name: MLflow 3 keeps the file store, in maintenance mode
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        if not os.environ.get("MLFLOW_TRACKING_URI"):
            # MLflow's stores fall back to the process's global client in places (a models:/ source on a SQL
            # store); unset, that is sqlite:///mlflow.db in the working directory (MLflow 3.7+): this store instead.
            mlflow.set_tracking_uri(tracking_uri)
        self.uri = tracking_uri
        self.client = MlflowClient(tracking_uri, registry_uri)
        # A server refuses a local path as a model version's source; a file or SQLite store takes it (registry.py).
        self.is_server = tracking_uri.startswith(("http://", "https://", "databricks"))

    def experiment(self, name: str) -> str:
        found = self.client.get_experiment_by_name(name)
        if found is not None and found.lifecycle_stage != "deleted":
            return found.experiment_id
        if found is not None:
            self.client.restore_experiment(found.experiment_id)
            return found.experiment_id
        return self.client.create_experiment(name, artifact_location=self._artifact_location(name))

    def _artifact_location(self, experiment: str) -> str | None:
        """A SQLite store's artifacts beside its database: MLflow's default is ./mlruns in the working directory."""
        if not self.uri.startswith("sqlite:///"):
            return None
        folder = Path(self.uri.removeprefix("sqlite:///")).resolve().parent / "mlruns"
        return (folder / urllib.parse.quote(experiment, safe="")).as_uri()

    def find(self, experiment_id: str, key: str, tag: str = KEY_TAG) -> list[Any]:
        return list(self.client.search_runs([experiment_id], filter_string=f"tags.`{tag}` = '{key}'"))

    def send_run(self, experiment_id: str, records: RunRecords) -> tuple[str, bool]:
        """(the parent run's id, whether anything was sent): a job sent whole before is not sent again."""
        done = [run for run in self.find(experiment_id, records.parent.key) if run.data.tags.get(COMPLETE_TAG)]
        if done:
            return done[0].info.run_id, False
        for partial in self.find(experiment_id, records.parent.key, JOB_TAG):
            self.client.delete_run(partial.info.run_id)
        parent = self._create(experiment_id, records.parent, None)
        for step in records.steps:
            self._finish(self._create(experiment_id, step, parent), step)
        self._finish(parent, records.parent)
        return parent, True

    def log_into(self, run_id: str, tracked: TrackedRun) -> None:
        """A step logged into a run someone else made and ends (KFP's nested run: MLFLOW_RUN_ID)."""
        self._log(run_id, tracked, tags=True)

    def _create(self, experiment_id: str, tracked: TrackedRun, parent: str | None) -> str:
        tags = {**tracked.tags, **({"mlflow.parentRunId": parent} if parent else {})}
        run = self.client.create_run(experiment_id, start_time=tracked.start_ms, tags=tags, run_name=tracked.name)
        self._log(run.info.run_id, tracked, tags=False)
        return run.info.run_id

    def _finish(self, run_id: str, tracked: TrackedRun) -> None:
        # Ended first, marked whole last: a send killed between them leaves a run without the mark, which the
        # next send deletes and sends again (marked first, it would stay RUNNING, skipped by every send).
        self.client.set_terminated(run_id, tracked.status, end_time=tracked.end_ms)
        self.client.set_tag(run_id, COMPLETE_TAG, "true")

    def _log(self, run_id: str, tracked: TrackedRun, tags: bool) -> None:
        from mlflow.entities import Metric, Param, RunTag

        stamp = tracked.end_ms or int(time.time() * 1000)  # the same on every send: a resend is equal
        batches = {"metrics": [Metric(m.key, m.value, stamp, m.step) for m in tracked.metrics],
                   "params": [Param(k, v) for k, v in tracked.params.items()],
                   "tags": [RunTag(k, v) for k, v in tracked.tags.items()] if tags else []}
        for kind, items in batches.items():
            for start in range(0, len(items), BATCH[kind]):
                self.client.log_batch(run_id, **{kind: items[start:start + BATCH[kind]]})
        for path in tracked.artifacts:
            self.client.log_artifact(run_id, path, artifact_path=_artifact_folder(path))
        if tracked.datasets:
            self.client.log_inputs(run_id, datasets=_dataset_inputs(tracked))


def _dataset_inputs(tracked: TrackedRun) -> list[Any]:
    """The run's data as MLflow dataset inputs, its split as MLflow's context tag (the Dataset column shows it)."""
    from mlflow.entities import Dataset, DatasetInput, InputTag

    return [DatasetInput(Dataset(name=d.name, digest=d.digest, source_type=d.source_type, source=d.source,
                                 profile=d.profile), tags=[InputTag("mlflow.data.context", d.context)])
            for d in tracked.datasets]


def _artifact_folder(path: str) -> str:
    """The output folder a file came from (evaluation/, examples/, ...), so equal names do not collide."""
    parent = Path(path).parent.name
    return parent.removesuffix(".d") or "files"
