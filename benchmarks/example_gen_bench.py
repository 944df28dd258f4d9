"""One contender of the ExampleGen benchmark, run in its own process so its imports and memory count.

    python -m benchmarks.example_gen_bench --contender a --index I.csv --data-root D --output OUT
    python -m benchmarks.example_gen_bench --contender c --eg-mode in_memory ...

Contenders (all write raw uint8 pixel bytes + an int64 label per record):
  a  the seed tutorials' way: read the CSV, PIL-decode each file, build a `tf.train.Example`,
     write it with `tf.io.TFRecordWriter`, in one process;
  b  the same loop over a 2-process `multiprocessing` pool (fork, TF imported before it), each
     process writing its own file;
  c  shardflow ExampleGen through its Python API, `--eg-mode auto` being its own default
     (its local pool: one forked worker per core, at every size); the other modes run Beam's
     FnApiRunner.
The last stdout line is a JSON report: records written, and epoch times of imports done and end
of work (before interpreter shutdown). The parent (`example_gen_suite`) measures everything else.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

from shardflow.core.process_defaults import apply_process_defaults

apply_process_defaults()  # as the command and a pipeline step, before TensorFlow is imported

from benchmarks.data import read_index  # noqa: E402  (light: csv + numpy + PIL)

EG_MODES = ("auto", "in_memory", "multi_processing")
Rows = list[tuple[str, int]]
Write = Callable[[Rows, str], int]  # (rows, output file) → records written
_POOL: dict[str, Any] = {}  # rows and write function, set before forking the pool; workers read their slice


def serialize_example(tf: Any, payload: bytes, label: int) -> bytes:
    """The loops' record: image bytes under "x", the int64 label under "y"."""
    return tf.train.Example(features=tf.train.Features(feature={
        "x": tf.train.Feature(bytes_list=tf.train.BytesList(value=[payload])),
        "y": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
    })).SerializeToString()


def write_loop(rows: Rows, data_root: str, path: str) -> int:
    """The tutorials' loop: PIL decode → tf.train.Example(raw bytes, label) → TFRecordWriter."""
    import numpy as np
    import tensorflow as tf
    from PIL import Image

    with tf.io.TFRecordWriter(path) as writer:
        for relative, label in rows:
            with Image.open(os.path.join(data_root, relative)) as image:
                pixels = np.asarray(image)  # decodes here
            writer.write(serialize_example(tf, pixels.tobytes(), label))
    return len(rows)


def _write_range(job: tuple[int, int, str]) -> int:
    start, stop, path = job
    return _POOL["write"](_POOL["rows"][start:stop], path)


def pool_write(rows: Rows, write: Write, output: str, processes: int) -> int:
    """`write` over a fork pool, each process writing its own `part-<i>.tfrecord` of a contiguous slice."""
    _POOL.update(rows=rows, write=write)  # inherited by the forked workers: nothing large is pickled
    bounds = [len(rows) * i // processes for i in range(processes + 1)]
    jobs = [(bounds[i], bounds[i + 1], os.path.join(output, f"part-{i}.tfrecord")) for i in range(processes)]
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        return sum(pool.map(_write_range, jobs, chunksize=1))


def loop_contender(index: str, write: Write, output: str, processes: int = 1) -> dict[str, Any]:
    """Contender a (`processes` 1: one file `a.tfrecord`) or b (a fork pool); TF imported first."""
    import tensorflow  # noqa: F401  (the tutorials import it first; b's workers inherit it)

    imported = time.time()
    rows = read_index(Path(index))
    if processes == 1:
        records = write(rows, os.path.join(output, "a.tfrecord"))
    else:
        records = pool_write(rows, write, output, processes)
    return {"records": records, "imported_at": imported}


def contender_a(index: str, data_root: str, output: str) -> dict[str, Any]:
    return loop_contender(index, lambda rows, path: write_loop(rows, data_root, path), output)


def contender_b(index: str, data_root: str, output: str, processes: int = 2) -> dict[str, Any]:
    return loop_contender(index, lambda rows, path: write_loop(rows, data_root, path), output, processes)


def eg_beam_args(mode: str, workers: int = 2) -> list[str]:
    """Beam flags for an `--eg-mode`; `auto` leaves the choice to ExampleGen's own default."""
    if mode == "auto":
        return []
    if mode == "multi_processing":
        return [f"--direct_running_mode={mode}", f"--direct_num_workers={workers}"]
    return [f"--direct_running_mode={mode}"]


def contender_c(index: str, data_root: str, output: str, mode: str = "auto", **options: Any) -> dict[str, Any]:
    """ExampleGen, every row in split "train"; `options`: further `ExampleGenConfig` fields (resize, storage…)."""
    from shardflow.example_gen import ExampleGenConfig, IndexSpec, run

    imported = time.time()
    config = ExampleGenConfig(
        indexes=(IndexSpec(index, "train"),), data_root=data_root, output=output,
        beam_args=tuple(eg_beam_args(mode)), progress_seconds=3600.0, **options,
    )
    manifest = run(config, echo=lambda text: print(text, file=sys.stderr))
    return {
        "records": manifest.splits["train"].num_examples,
        "rejected": manifest.extra["rejected"],
        "runner": manifest.extra["runner"],
        "shards": len(manifest.splits["train"].shards),
        "imported_at": imported,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--contender", choices=("a", "b", "c"), required=True)
    parser.add_argument("--index", required=True, help="CSV index with columns x,y")
    parser.add_argument("--data-root", required=True)
    parser.add_argument("--output", required=True, help="directory for this contender's output")
    parser.add_argument("--eg-mode", choices=EG_MODES, default="auto", help="contender c's FnApiRunner mode")
    parser.add_argument("--processes", type=int, default=2, help="contender b's pool size")
    args = parser.parse_args(argv)
    os.makedirs(args.output, exist_ok=True)
    if args.contender == "a":
        report = contender_a(args.index, args.data_root, args.output)
    elif args.contender == "b":
        report = contender_b(args.index, args.data_root, args.output, args.processes)
    else:
        report = contender_c(args.index, args.data_root, args.output, args.eg_mode)
    report["ended_at"] = time.time()
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
