"""Two `shardflow run`s into one `--output` share its step cache (RUN/cache/<step>/<key>.json): when both
store the same entry at once, in two processes, every read of it finds a whole entry or none, never a part.

Each writer stores the same key WRITES times with its own large outputs (a torn write would be a JSON
error or a mix of the two) while this process looks the entry up as fast as it can; afterwards the entry
is one writer's whole record, and no temporary file is left beside it.
"""
from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

from shardflow.pipelines.local_cache import StepCache

WRITES, PAYLOAD_BYTES = 25, 1 << 20
TASK, KEY = "train", "f" * 64


def _outputs(writer: str, write: int) -> dict[str, Any]:
    """A step's outputs as the cache records a parameter output: large, and naming its writer on every byte."""
    return {"summary": {"writer": writer, "write": write, "padding": writer * PAYLOAD_BYTES}}


def store_repeatedly(root: str, writer: str, start: Any) -> None:
    """A writer process: waits for the other, then stores the one entry WRITES times."""
    cache = StepCache(Path(root))
    start.wait()
    for write in range(WRITES):
        cache.store(TASK, KEY, _outputs(writer, write), Path(root) / "runs" / writer)


def _whole(found: dict[str, Any]) -> bool:
    summary = found["summary"]
    return summary["writer"] in "ab" and summary == _outputs(summary["writer"], summary["write"])["summary"]


def test_two_processes_storing_one_entry_leave_it_whole_or_absent(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(3)
    writers = [context.Process(target=store_repeatedly, args=(str(tmp_path), name, start)) for name in "ab"]
    for process in writers:
        process.start()
    cache, reads, found_whole = StepCache(tmp_path), 0, 0
    start.wait(timeout=120)
    while any(process.is_alive() for process in writers) or reads == 0:
        found = cache.lookup(TASK, KEY)  # a torn entry would fail to parse here, or fail _whole
        reads += 1
        if found is not None:
            assert _whole(found), {k: str(v)[:80] for k, v in found["summary"].items()}
            found_whole += 1
    for process in writers:
        process.join(timeout=60)
        assert process.exitcode == 0
    final = cache.lookup(TASK, KEY)
    assert final is not None and _whole(final) and final["summary"]["write"] == WRITES - 1
    assert [p.name for p in (tmp_path / TASK).iterdir()] == [f"{KEY}.json"]  # no temporary file left
    assert found_whole > 0, reads  # the reads overlapped the writes
