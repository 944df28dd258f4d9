"""The reader on ExampleGen's JPEG photo shards: shardflow's reader vs a plain one, fused crop vs decode-then-crop.

    python -m benchmarks.photos_reader --examples bench_out/photos-eg/out      # split "train"
    figures = reader_figures(Path("out"), Path("bench_out"))  # what the photos suite calls

Contenders, built once, drained once as warm-up, then drained `rounds` times taking turns (every
other round reversed: `trainer_bench.time_datasets`); each yields batches of `BATCH_SIZE`,
deterministic=False, image + label:

- `reference`: interleave over the shards → `parse_single_example` → `decode_jpeg` in a parallel
  map → batch → prefetch (uint8 [B, H, W, C]);
- `make_dataset`: `shardflow.core.input_stream.build_stream(..., deterministic=False)` (uint8, same shape);
- `garden_shuffled` and `make_dataset_shuffled`: the same two, shuffling 2,048 serialized records
  before decoding (the Model Garden's reader; shardflow's budget is 2,048 mean-sized records in
  bytes). Each is also run alone in a process of its own for its peak RSS;
- `decode_then_crop` and `fused_crop`: random-resized-crop as ImageNet input pipelines draw it
  (`stateless_sample_distorted_bounding_box` over `extract_jpeg_shape`: 8-100 % of the area, aspect
  3/4-4/3), then bilinear resize to H×W (float32). The first decodes the whole image and slices the
  window; the second decodes only the window (`decode_and_crop_jpeg`). Both draw the window from
  the record's position in the stream, so both crop the same windows.
- `trainer_warp_crop` and `trainer_fused_crop` (unless `--no-trainer`): the Trainer's training stream
  (`build_streams`, default shuffle window, `--augment crop flip`, float32 in [0, 1]) for one epoch,
  with the fused JPEG crop switched off (decode the batch, then the projective warp) and on.

Rate = examples / pass seconds (median over rounds); CPU µs per example = the process's CPU
seconds (all threads) during a pass / examples: the cost, less sensitive to other users' load.
"""
from __future__ import annotations

import argparse
import json
import os
import math
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable
from unittest import mock

import tensorflow as tf

from shardflow.core.image_decode import JPEG_DCT, decode_crop_resize, decode_then_crop_resize
from shardflow.core.manifest import Manifest, read_manifest
from shardflow.core.input_stream import PARALLEL_FILES, StreamOptions, build_stream
from shardflow.core.reader import record_bytes, shard_files

from .monitor import child_env
from .trainer_bench import time_datasets

AUTOTUNE = tf.data.AUTOTUNE
BATCH_SIZE = 128
ROUNDS = 3
AREA_RANGE = (0.08, 1.0)  # the usual ImageNet random-resized-crop bounds
ASPECT_RANGE = (3 / 4, 4 / 3)
CROP_SEED = 14
SHUFFLED_RECORDS = 2_048  # the Model Garden reader's shuffle of serialized records
RATIOS = {"make_dataset / reference": ("make_dataset", "reference"),
          "shuffled: make_dataset / Model Garden": ("make_dataset_shuffled", "garden_shuffled"),
          "fused / decode-then-crop": ("fused_crop", "decode_then_crop"),
          "Trainer fused / warp crop": ("trainer_fused_crop", "trainer_warp_crop")}


def _names(manifest: Manifest, encoding: str | None = "jpeg") -> tuple[str, str]:
    """The image feature (stored as `encoding`; None: any storage) and the label feature."""
    images = [n for n, f in manifest.features.items() if f.role == "image" and encoding in (None, f.encoding)]
    labels = [n for n, f in manifest.features.items() if f.role == "label"]
    if not images or not labels:
        raise ValueError(f"need a {encoding or ''} image feature and a label; features: {sorted(manifest.features)}")
    return images[0], labels[0]


def _records(examples: Path, manifest: Manifest) -> tf.data.Dataset:
    files = shard_files(examples, manifest, "train")
    names = tf.data.Dataset.from_tensor_slices(files)
    return names.interleave(lambda path: tf.data.TFRecordDataset(path, manifest.compression),
                            cycle_length=max(1, min(PARALLEL_FILES, len(files))), num_parallel_calls=AUTOTUNE,
                            deterministic=False)


def _per_record(examples: Path, decode: Callable[..., tuple[tf.Tensor, tf.Tensor]], enumerate_: bool,
                shuffle: int = 0) -> tf.data.Dataset:
    manifest = read_manifest(examples)
    records = _records(examples, manifest)
    records = records.shuffle(shuffle) if shuffle else records  # serialized records, before decoding
    records = records.enumerate() if enumerate_ else records
    return records.map(decode, num_parallel_calls=AUTOTUNE, deterministic=False).batch(BATCH_SIZE).prefetch(AUTOTUNE)


def _parser(manifest: Manifest) -> Callable[[tf.Tensor], tuple[tf.Tensor, tf.Tensor]]:
    image, label = _names(manifest)
    spec = {image: tf.io.FixedLenFeature([], tf.string), label: tf.io.FixedLenFeature([], tf.int64)}

    def parse(record: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        parsed = tf.io.parse_single_example(record, spec)
        return parsed[image], parsed[label]

    return parse


def reference(examples: Path, shuffle: int = 0) -> tf.data.Dataset:
    """The plain reader: interleave → [shuffle serialized] → parse_single_example → decode_jpeg (parallel map) → batch.

    With `shuffle`, the Model Garden's reader: `shuffle` serialized records, decoded after.
    """
    manifest = read_manifest(examples)
    parse, channels = _parser(manifest), manifest.features[_names(manifest)[0]].shape[2]

    def decode(record: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        blob, label = parse(record)
        return tf.io.decode_jpeg(blob, channels=channels, dct_method=JPEG_DCT), label

    return _per_record(examples, decode, enumerate_=False, shuffle=shuffle)


def shardflow_reader(examples: Path, encoding: str | None = "jpeg", shuffle: int = 0) -> tf.data.Dataset:
    """`build_stream` over the image (stored as `encoding`; None: any) and label features, as (images, labels).

    `shuffle`: records to shuffle, given to `build_stream` as MB (that many mean-sized records).
    """
    manifest = read_manifest(examples)
    image, label = _names(manifest, encoding)
    budget = math.ceil(shuffle * record_bytes(manifest, "train"))
    options = StreamOptions(batch_size=BATCH_SIZE, deterministic=False, features=(image, label),
                            shuffle_mb=budget / 1_000_000)
    dataset = build_stream(examples, "train", options)
    return dataset.map(lambda batch: (batch[image], batch[label]))


def random_resized_crop(examples: Path, fused: bool) -> tf.data.Dataset:
    """ImageNet-style random-resized-crop to the stored H×W, decoding the whole image or only the window."""
    manifest = read_manifest(examples)
    parse = _parser(manifest)
    height, width, channels = manifest.features[_names(manifest)[0]].shape
    crop = decode_crop_resize if fused else decode_then_crop_resize

    def decode(position: tf.Tensor, record: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        blob, label = parse(record)
        begin, size, _ = tf.image.stateless_sample_distorted_bounding_box(
            tf.image.extract_jpeg_shape(blob), tf.zeros([1, 0, 4]), seed=tf.stack([tf.constant(CROP_SEED, tf.int64), position]),
            min_object_covered=0.0, aspect_ratio_range=ASPECT_RANGE, area_range=AREA_RANGE, max_attempts=10,
            use_image_if_no_bounding_boxes=True)
        window = tf.stack([begin[0], begin[1], size[0], size[1]])
        return crop(blob, window, [height, width], channels), label

    return _per_record(examples, decode, enumerate_=True)


def trainer_stream(examples: Path, fused: bool) -> tf.data.Dataset:
    """One epoch of the Trainer's training stream with `crop` and `flip`, the fused JPEG crop on or off."""
    from shardflow.trainer import ExportOptions, FitOptions, InputOptions, TrainerConfig
    from shardflow.trainer import input_pipeline
    from shardflow.trainer.features import RawToModel
    from shardflow.trainer.task import resolve_task

    config = TrainerConfig(input=InputOptions(examples=str(examples), batch_size=BATCH_SIZE, augment=("crop", "flip"),
                                              eval_split=None),
                           fit=FitOptions(steps=1), export=ExportOptions(output="unused"))
    task = resolve_task(config.input)
    to_model = RawToModel(task, None)
    if not input_pipeline.fused_crop_applies(task, config.input, to_model):
        raise ValueError(f"{examples}: the fused crop does not apply (needs a JPEG classification input)")
    with mock.patch.object(input_pipeline, "fused_crop_applies", return_value=fused):
        streams = input_pipeline.build_streams(task, config.input, BATCH_SIZE, 1, to_model)
    return streams.train.take(math.ceil(streams.train_examples / BATCH_SIZE))


def contenders(examples: Path, trainer: bool = False) -> dict[str, tf.data.Dataset]:
    datasets = {"reference": reference(examples), "make_dataset": shardflow_reader(examples),
                "garden_shuffled": reference(examples, SHUFFLED_RECORDS),
                "make_dataset_shuffled": shardflow_reader(examples, shuffle=SHUFFLED_RECORDS),
                "decode_then_crop": random_resized_crop(examples, fused=False),
                "fused_crop": random_resized_crop(examples, fused=True)}
    if trainer:
        datasets.update(trainer_warp_crop=trainer_stream(examples, fused=False),
                        trainer_fused_crop=trainer_stream(examples, fused=True))
    return datasets


def reader_figures(examples: Path, work: Path, rounds: int = ROUNDS, trainer: bool = True) -> dict[str, Any]:
    """Every contender's figures and the two ratios (of median rates and of CPU per example).

    `work` receives `photos_reader.json` (the same dict).
    """
    figures = time_datasets(contenders(Path(examples), trainer), rounds)
    ratios = {}
    for label, (numerator, denominator) in RATIOS.items():
        if numerator not in figures:
            continue
        top, bottom = figures[numerator], figures[denominator]
        ratios[label] = {"rate": top["median_per_s"] / bottom["median_per_s"],
                         "cpu_per_example": top["median_cpu_us_per_example"] / bottom["median_cpu_us_per_example"]}
    for name in ("garden_shuffled", "make_dataset_shuffled"):
        figures[name]["peak_rss_mb"] = alone_peak_rss_mb(Path(examples), name)
    manifest = read_manifest(examples)
    result = {"examples_dir": str(examples), "examples": figures["reference"]["examples"],
              "image_shape": list(manifest.features[_names(manifest)[0]].shape), "batch_size": BATCH_SIZE,
              "rounds": rounds, "load_before": os.getloadavg()[0], "contenders": figures, "ratios": ratios}
    Path(work).mkdir(parents=True, exist_ok=True)
    (Path(work) / "photos_reader.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def alone_peak_rss_mb(examples: Path, name: str) -> float:
    """Peak RSS (MB) of a process that drains contender `name` twice and nothing else (its memory alone)."""
    command = [sys.executable, "-m", "benchmarks.photos_reader", "--examples", str(examples), "--alone", name]
    process = subprocess.Popen(command, env=child_env(), stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status):
        raise RuntimeError(f"reader {name} alone failed (exit {os.waitstatus_to_exitcode(status)})")
    return usage.ru_maxrss / 1024  # kilobytes on Linux


def _drain_alone(examples: Path, name: str) -> None:
    datasets = {"garden_shuffled": lambda: reference(examples, SHUFFLED_RECORDS),
                "make_dataset_shuffled": lambda: shardflow_reader(examples, shuffle=SHUFFLED_RECORDS)}
    dataset = datasets[name]()
    for _ in range(2):
        for _ in dataset:
            pass


def markdown(result: dict[str, Any]) -> str:
    shape = "×".join(map(str, result["image_shape"]))
    lines = [f"{result['examples']:,} examples of {shape} JPEG, batch {result['batch_size']}, "
             f"median of {result['rounds']} rounds (1-min load before: {result['load_before']:.1f})", "",
             "| contender | examples/s | CPU µs/example | peak RSS alone |", "|---|---:|---:|---:|"]
    for name, figures in result["contenders"].items():
        rss = f"{figures['peak_rss_mb']:,.0f} MB" if "peak_rss_mb" in figures else ""
        lines.append(f"| {name} | {figures['median_per_s']:,.0f} | {figures['median_cpu_us_per_example']:,.0f} | {rss} |")
    lines += ["", "| ratio | rate | CPU per example |", "|---|---:|---:|"]
    for label, ratio in result["ratios"].items():
        lines.append(f"| {label} | {ratio['rate']:.2f}× | {ratio['cpu_per_example']:.2f}× |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.photos_reader", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=Path, required=True, help="ExampleGen output with JPEG images, split train")
    parser.add_argument("--work", type=Path, default=Path(os.environ.get("BENCH_WORK", "bench_out")))
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--no-trainer", action="store_true", help="leave out the Trainer's two streams")
    parser.add_argument("--alone", help=argparse.SUPPRESS)  # drain one shuffled contender (its peak RSS)
    args = parser.parse_args(argv)
    if args.alone:
        _drain_alone(args.examples, args.alone)
        return 0
    print(markdown(reader_figures(args.examples, args.work, args.rounds, trainer=not args.no_trainer)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
