"""The statistics pass in a process of its own, started as a run starts, so TFDV's import is off the critical path.

TFDV brings TensorFlow: ~5-6 s of CPU to import, needed only after the rows. In the launcher, the
import waited for the plan and then competed with the encoding for the GIL (threads) or ran after it
(in_memory). Here a fresh interpreter imports it from the first second of the run, beside the
planning and the workers, on whatever core is free; the launcher itself never imports TensorFlow.
Keras is blocked in this process: TensorFlow's `__init__` imports it eagerly (~1 s) and TFDV never
uses it. The process dies with the launcher (Linux `PR_SET_PDEATHSIG`, and the end of its input).

    with StatisticsProcess() as statistics:      # spawned: the import starts now
        ...                                      # plan, encode, write shards
        statistics.request(column_files, columns, staged_dir, "train")
        ...                                      # the launcher's own checks meanwhile
        schema = statistics.schema()

The process writes `<staged_dir>/<split>.pb` for every split (statistics.write_statistics); `schema()`
waits for it and returns the schema inferred on the named split's statistics (statistics.infer_schema).
"""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
import traceback
from typing import TYPE_CHECKING, Any, BinaryIO

from ..core.errors import ShardflowError

if TYPE_CHECKING:
    from tensorflow_metadata.proto.v0 import schema_pb2

    from .columns import ColumnSpec


class StatisticsFailed(ShardflowError, RuntimeError):
    """The statistics process raised (its traceback follows) or died."""


class StatisticsProcess:
    """A child process that imports TFDV at once and computes one run's statistics and schema on request."""

    def __init__(self) -> None:
        self._process = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, env={**os.environ, "_SHARDFLOW_PARENT": str(os.getpid())})

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
                stream.close()

    def request(self, column_files: dict[str, list[str]], columns: tuple[ColumnSpec, ...], out_dir: str,
                schema_split: str) -> None:
        """Starts the statistics of every split (written under `out_dir`) and the schema of `schema_split`."""
        assert self._process.stdin is not None
        try:
            pickle.dump((column_files, columns, out_dir, schema_split), self._process.stdin)
            self._process.stdin.close()
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


def _serve(request: BinaryIO, reply: BinaryIO) -> None:
    from .statistics import infer_schema, write_statistics  # the import: TFDV and TensorFlow
    from ..core import storage

    column_files, columns, out_dir, schema_split = pickle.load(request)
    try:
        write_statistics(column_files, columns, out_dir)
        schema = infer_schema(storage.join(out_dir, f"{schema_split}.pb"), columns)
        answer: tuple[str, Any] = ("schema", schema.SerializeToString())
    except BaseException:  # noqa: BLE001  (reported to the launcher, which raises it)
        answer = ("error", traceback.format_exc())
    pickle.dump(answer, reply)
    reply.flush()


def main() -> None:
    from .local_pool import die_with_parent  # noqa: PLC0415

    die_with_parent()
    if os.getppid() != int(os.environ.get("_SHARDFLOW_PARENT", os.getppid())):
        os._exit(1)  # the launcher died before the signal was armed
    reply = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything a library prints goes to stderr, not into the replies
    sys.modules["keras"] = sys.modules["tf_keras"] = None  # type: ignore[assignment]
    try:
        _serve(sys.stdin.buffer, reply)
    except EOFError:  # the launcher ended without a request (a failed run)
        pass


if __name__ == "__main__":
    main()
