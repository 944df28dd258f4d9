"""The statistics pass in a process of its own, started as a run starts, so TFDV's import is off the critical path.

TFDV brings TensorFlow: ~5-6 s of CPU to import, needed only after the rows. In the launcher, the
import waited for the plan and then competed with the encoding for the GIL (threads) or ran after it
(in_memory). Here a fresh interpreter imports it from the first second of the run, beside the
planning and the workers, on whatever core is free; the launcher itself never imports TensorFlow.
And this process does not either: TFDV's statistics and schema inference run on a stand-in
(tensorflow_absent.py), which leaves ~3 s of CPU and ~250 MB; should anything fail under it, the
process runs itself again with the real TensorFlow (`--with-tensorflow`, Keras blocked: TensorFlow
imports it eagerly and TFDV never uses it). The process dies with the launcher (Linux
`PR_SET_PDEATHSIG`, and the end of its input).

    with StatisticsProcess() as statistics:      # spawned: the import starts now
        ...                                      # plan
        statistics.prepare(splits, columns, staged_dir, "train")   # it builds and starts the pipeline
        ...                                      # encode, write shards
        statistics.request(column_files)         # the pipeline reads them now
        ...                                      # the launcher's own checks meanwhile
        schema = statistics.schema()

The process writes `<staged_dir>/<split>.pb` for every split (statistics.write_statistics_when_ready);
`schema()` waits for it and returns the schema inferred on the named split's statistics. The Beam
pipeline of the statistics is built and started while the rows are encoded (~0.5 s of CPU that was
after the rows): its first step waits for the column files.
"""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
import traceback
from typing import TYPE_CHECKING, Any, BinaryIO

from ..core.errors import ShardflowError
from . import tensorflow_absent

if TYPE_CHECKING:
    from tensorflow_metadata.proto.v0 import schema_pb2

    from .columns import ColumnSpec


_MODULE = __spec__.name if __spec__ is not None else __name__  # this module's name, also when run with -m
WITH_TENSORFLOW = "--with-tensorflow"  # run with the real TensorFlow (the fallback; tests)
# Beam's cloud connectors, which `apache_beam.io` and its FileSystems registry import when their
# libraries are installed (each import is in a try/except ImportError), and which this process never
# uses: it reads column files through core.storage, whose object-store clients are other modules. Blocked
# with the stand-in (the fallback imports everything): the import CPU went 1.90 → 1.44 s (minimum of
# 5 runs each, interleaved).
UNUSED_BEAM_CONNECTORS = ("apache_beam.io.gcp.bigquery", "apache_beam.io.gcp.gcsfilesystem",
                          "apache_beam.io.aws.s3filesystem", "apache_beam.io.azure.blobstoragefilesystem")


class StatisticsFailed(ShardflowError, RuntimeError):
    """The statistics process raised (its traceback follows) or died."""


class StatisticsProcess:
    """A child process that imports TFDV at once and computes one run's statistics and schema on request."""

    def __init__(self, *args: str) -> None:
        environment = {**os.environ, "_SHARDFLOW_PARENT": str(os.getpid())}
        self._process = subprocess.Popen([sys.executable, "-m", _MODULE, *args], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, env=environment)

    def __enter__(self) -> "StatisticsProcess":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait()
        for stream in (self._process.stdin, self._process.stdout):
            if stream is not None:
                try:
                    stream.close()
                except BrokenPipeError:  # unsent input of a process that died
                    pass

    def prepare(self, splits: list[str], columns: tuple[ColumnSpec, ...], out_dir: str, schema_split: str) -> None:
        """What the statistics will be of: the process builds and starts their pipeline while the rows are encoded."""
        self._send((list(splits), columns, out_dir, schema_split))

    def request(self, column_files: dict[str, list[str]]) -> None:
        """The column files of every prepared split: the statistics are computed now."""
        self._send(column_files)

    def _send(self, message: Any) -> None:
        assert self._process.stdin is not None
        try:
            pickle.dump(message, self._process.stdin)
            self._process.stdin.flush()
        except BrokenPipeError:
            raise self._died() from None

    def schema(self) -> "schema_pb2.Schema":
        """Waits for the requested statistics; the inferred schema."""
        from tensorflow_metadata.proto.v0 import schema_pb2

        assert self._process.stdout is not None
        try:
            kind, payload = pickle.load(self._process.stdout)
        except (EOFError, pickle.UnpicklingError):
            raise self._died() from None
        if kind == "error":
            raise StatisticsFailed(f"the statistics pass failed:\n{payload}")
        return schema_pb2.Schema.FromString(payload)

    def _died(self) -> StatisticsFailed:
        return StatisticsFailed(f"the statistics process died (exit code {self._process.wait()})")


class _Requests:
    """The two messages from the launcher, read from this process's input once each and kept (for a rerun)."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.prepared: tuple | None = None
        self._files: dict[str, list[str]] | None = None

    def prepare(self) -> tuple:
        self.prepared = pickle.load(self.stream)
        return self.prepared

    def column_files(self) -> dict[str, list[str]]:
        """Blocks until the launcher sends the column files (called inside the statistics pipeline)."""
        if self._files is None:
            self._files = pickle.load(self.stream)
        return self._files

    def replay(self) -> bytes:
        """Both messages as they came, for a rerun of this process (waits for the second one)."""
        return pickle.dumps(self.prepared) + pickle.dumps(self.column_files())


def _answer(requests: _Requests) -> tuple[str, Any]:
    """("schema", its bytes) or ("error", the traceback)."""
    from .statistics import infer_schema, write_statistics_when_ready
    from ..core import storage

    splits, columns, out_dir, schema_split = requests.prepared  # type: ignore[misc]
    try:
        write_statistics_when_ready(splits, requests.column_files, columns, out_dir)
        schema = infer_schema(storage.join(out_dir, f"{schema_split}.pb"), columns)
        return "schema", schema.SerializeToString()
    except BaseException:  # noqa: BLE001  (reported to the launcher, which raises it)
        tensorflow = "the stand-in" if isinstance(sys.modules.get("tensorflow"), tensorflow_absent.StandIn) \
            else "TensorFlow"
        return "error", f"(with {tensorflow}) {traceback.format_exc()}"


def _with_tensorflow(requests: bytes | None, reply: BinaryIO) -> None:
    """Runs this process again with the real TensorFlow, the requests (if read already) as its input."""
    os.dup2(reply.fileno(), 1)  # the replies' pipe as its standard output again
    if requests is not None:
        with tempfile.TemporaryFile() as saved:
            saved.write(requests)
            saved.seek(0)
            os.dup2(saved.fileno(), 0)
    os.execv(sys.executable, [sys.executable, "-m", _MODULE, WITH_TENSORFLOW])


def light_imports() -> None:
    """TensorFlow's stand-in, and Beam's unused cloud connectors blocked (`import` raises ImportError)."""
    tensorflow_absent.install()
    for name in UNUSED_BEAM_CONNECTORS:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]


def main() -> None:
    from .local_pool import die_with_parent

    die_with_parent()
    if os.getppid() != int(os.environ.get("_SHARDFLOW_PARENT", os.getppid())):
        os._exit(1)  # the launcher died before the signal was armed
    reply = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything a library prints goes to stderr, not into the replies
    sys.modules["keras"] = sys.modules["tf_keras"] = None  # type: ignore[assignment]
    stand_in = WITH_TENSORFLOW not in sys.argv
    if stand_in:
        light_imports()
    try:
        from . import statistics  # noqa: F401  (the import this process exists for: TFDV)
    except Exception:  # noqa: BLE001  (a TFDV that needs TensorFlow as it is imported)
        if stand_in:
            _with_tensorflow(None, reply)
        raise
    requests = _Requests(sys.stdin.buffer)
    try:
        requests.prepare()
        kind, payload = _answer(requests)
        if kind == "error" and stand_in:
            _with_tensorflow(requests.replay(), reply)  # the statistics needed TensorFlow: computed again with it
    except EOFError:  # the launcher ended without a request (a failed run)
        return
    pickle.dump((kind, payload), reply)
    reply.flush()


if __name__ == "__main__":
    main()
