"""One contender of the photos benchmark, run in its own process so its imports and memory count.

    python -m benchmarks.photos_bench --contender a --storage jpeg --index I.csv --data-root D --output OUT

Every contender turns each photo into a 224×224 RGB image and writes it with its int64 label, as
JPEG (quality 95, what ExampleGen's `images.encode` uses) or as raw HWC bytes (`--storage`):
  a  a hand-written loop in one process: read the CSV, PIL open → convert("RGB") →
     resize((224, 224), BILINEAR) → encode → `tf.train.Example` → `tf.io.TFRecordWriter`;
  b  the same loop over a 2-process fork pool, each process writing its own file
     (`example_gen_bench.pool_write`, the 28×28 suite's pool);
  c  shardflow ExampleGen through its Python API as it runs by default (no Beam flags), with
     `--resize x=224x224 --channels x=rgb --storage x=<storage>`.
The last stdout line is the JSON report of `example_gen_bench` (records, imports done, end of work).
"""
from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
from pathlib import Path

from shardflow.core.process_defaults import apply_process_defaults

apply_process_defaults()  # as the command and a pipeline step, before TensorFlow is imported

from benchmarks.example_gen_bench import Rows, contender_c, loop_contender, serialize_example  # noqa: E402

SIDE = 224
STORAGES = ("jpeg", "raw")
JPEG_QUALITY = 95  # ExampleGen's (components/example_gen/images.py `encode`)


def photo_loop(rows: Rows, data_root: str, path: str, storage: str) -> int:
    """open → RGB → bilinear 224×224 → JPEG q95 or raw bytes → tf.train.Example → TFRecordWriter."""
    import tensorflow as tf
    from PIL import Image

    with tf.io.TFRecordWriter(path) as writer:
        for relative, label in rows:
            with Image.open(os.path.join(data_root, relative)) as image:
                resized = image.convert("RGB").resize((SIDE, SIDE), Image.Resampling.BILINEAR)
            if storage == "jpeg":
                buffer = io.BytesIO()
                resized.save(buffer, format="JPEG", quality=JPEG_QUALITY)
                payload = buffer.getvalue()
            else:
                payload = resized.tobytes()
            writer.write(serialize_example(tf, payload, label))
    return len(rows)


def photo_examples(work: Path, rows: int, name: str) -> Path:
    """`rows` of the benchmark photos through ExampleGen as 224-px JPEG (`--storage jpeg`), once, under
    work/<name>-<rows>/examples."""
    from shardflow.example_gen import ExampleGenConfig, IndexSpec
    from shardflow.example_gen import run as example_gen

    from testkit.photo_data import ensure_photo_index, ensure_photos

    out = work / f"{name}-{rows}" / "examples"
    if not (out / "manifest.json").is_file():
        root = ensure_photos(work / "photos")
        example_gen(ExampleGenConfig(indexes=(IndexSpec(str(ensure_photo_index(root, rows)), "train"),),
                                     data_root=str(root), output=str(out), **eg_options("jpeg")), echo=lambda _: None)
    return out


def eg_options(storage: str) -> dict[str, tuple]:
    """ExampleGenConfig fields equal to `--resize x=224x224 --channels x=rgb --storage x=<storage>`."""
    return {"resize": (("x", (SIDE, SIDE)),), "channels": (("x", "rgb"),), "storage": (("x", storage),)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--contender", choices=("a", "b", "c"), required=True)
    parser.add_argument("--storage", choices=STORAGES, required=True)
    parser.add_argument("--index", required=True, help="CSV index with columns x,y")
    parser.add_argument("--data-root", required=True)
    parser.add_argument("--output", required=True, help="directory for this contender's output")
    parser.add_argument("--processes", type=int, default=2, help="contender b's pool size")
    args = parser.parse_args(argv)
    os.makedirs(args.output, exist_ok=True)
    if args.contender == "c":
        report = contender_c(args.index, args.data_root, args.output, **eg_options(args.storage))
    else:
        processes = 1 if args.contender == "a" else args.processes
        report = loop_contender(args.index, lambda rows, path: photo_loop(rows, args.data_root, path, args.storage),
                                args.output, processes)
    report["ended_at"] = time.time()
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
