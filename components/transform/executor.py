"""Transform's `run(config)`: ExampleGen output → transform graph, transformed shards, statistics, manifest.

>>> from shardflow.transform import TransformConfig, run                          # doctest: +SKIP
>>> manifest = run(TransformConfig(examples="runs/examples", output="runs/transform"))  # doctest: +SKIP
>>> manifest.features["x"].dtype                                                 # doctest: +SKIP
'float32'

Crash safety as in ExampleGen, through the same `OutputDir` life cycle: the old manifest is removed
first; scratch files go under `<output>/.staging/`; splits, statistics and the transform graph are
written at `OutputDir.staged(name)` (locally under the staging area, moved into place on publish;
on an object store at their final names); the graph's raw metadata (`raw_metadata.py`, which TFX
user code reads) is added to the staged graph once the pipeline has written it; the manifest is
written last. A run killed at any point
leaves no manifest. `examples`, `output` and a preprocessing module file may be paths or URIs.
"""
from __future__ import annotations

import time
from typing import Callable

from .. import __version__
from ..core import storage
from ..core.beam_setup import describe_runner, make_pipeline, pipeline_options
from ..core.cloud_env import enable_tensorflow_filesystems
from ..core.example_rows import PROVENANCE_DIR, PROVENANCE_KEY, copy_example_rows
from ..core.manifest import MANIFEST_NAME, FeatureSpec, IncompleteOutputError, Manifest, SplitInfo, read_manifest
from ..core.shard_writer import ShardSizing
from ..core.output_dir import OutputDir
from ..core.errors import ConfigError
from ..core.progress import ProgressReporter
from ..core.hashing import sha256_of
from ..core.user_module import load_function
from .config import TransformConfig
from .pipeline import TRANSFORM_GRAPH, TransformPlan, build_transform, load_result
from .preprocessing import PreprocessingFn, make_preprocessing_fn, vocabulary_labels
from .raw_input import default_batch_size
from .raw_metadata import write_raw_metadata
from .report import (UnseenLabelsError, mask_classes, options_json, output_size, split_infos, summary_text,
                     unseen_labels, unseen_message, vocabulary_info)


def choose_preprocessing(config: TransformConfig, source: Manifest) -> PreprocessingFn:
    """The user's `module:function`, or the default built from the manifest's feature roles."""
    parts = config.preprocessing_parts
    if parts is None:
        return make_preprocessing_fn(source.features, dict(config.mask_classes))
    if config.mask_classes:
        raise ConfigError("mask_classes applies to the default preprocessing only; check ids in your preprocessing_fn")
    return load_function(*parts)


def _plan(config: TransformConfig, source: Manifest, out: OutputDir) -> TransformPlan:
    if config.analyze_split not in source.splits:
        raise ConfigError(f"analyze split {config.analyze_split!r} is not in the examples (has {sorted(source.splits)})")
    if source.splits[config.analyze_split].num_examples == 0:
        raise ConfigError(f"analyze split {config.analyze_split!r} has no examples")
    options = source.extra.get("options", {})
    sizing = ShardSizing(
        compression=source.compression if config.compression is None else config.compression,
        shard_size_mb=config.shard_size_mb,
        num_shards=config.num_shards,
        min_shards=config.min_shards or int(options.get("min_shards") or 1),
    )
    return TransformPlan(
        examples_dir=config.examples, scratch_dir=out.staging, publish_dir=out.publish_root, source=source,
        splits=tuple(source.splits),
        analyze_split=config.analyze_split, batch_size=config.batch_size or default_batch_size(source), sizing=sizing,
        compact_images=config.preprocessing is None,  # a user's graph may read other inputs for its image
    )


def beam_args_for(config: TransformConfig) -> list[str]:
    """The user's Beam flags; without a running mode, the FnApiRunner's in-memory mode.

    Transform's heavy work runs in TensorFlow and Arrow kernels that use several cores from one
    process. Measured on 2 cores at 100k 28x28 examples: in memory 52 s, 0.8 GB peak RSS; 2 worker
    processes 85 s (~35 s more start-up, then 12k instead of 7k examples/s), 2.3 GB. They would
    pay off only from roughly 1M examples; `--direct_running_mode=multi_processing` selects them.
    """
    args = list(config.beam_args)
    if not any(a.startswith("--direct_running_mode") for a in args):
        args.append("--direct_running_mode=in_memory")
    return args


def _execute(config: TransformConfig, plan: TransformPlan, fn: PreprocessingFn,
             echo: Callable[[str], None]) -> tuple[dict[str, FeatureSpec], dict]:
    total = sum(plan.source.splits[s].num_examples for s in plan.splits)
    options = pipeline_options(beam_args_for(config))  # the running mode is always set (see beam_args_for)
    echo(f"transform: {total:,} examples in {len(plan.splits)} splits, analyzers on {plan.analyze_split!r}, "
         f"batches of {plan.batch_size}, on {describe_runner(options)}")
    with ProgressReporter(storage.join(plan.scratch_dir, "done"), total, config.progress_seconds, echo):
        with make_pipeline(options) as pipeline:
            features, at_read = build_transform(pipeline, plan, fn)
    return features, {"runner": describe_runner(options), "applied_at_read": list(at_read)}


def read_source(config: TransformConfig) -> tuple[Manifest, str]:
    """The checks that read files, at the start of run(): the examples must be a complete output.

    Returns the source manifest and the SHA-256 of its file (hashed first: provenance of what was read).
    """
    try:
        source_sha256 = sha256_of(storage.join(config.examples, MANIFEST_NAME))
        return read_manifest(config.examples), source_sha256
    except (FileNotFoundError, IncompleteOutputError):
        raise ConfigError(f"examples {config.examples!r} has no {MANIFEST_NAME}: "
                          "not a complete ExampleGen output") from None


def run(config: TransformConfig, echo: Callable[[str], None] = print) -> Manifest:
    """Transforms every split of `config.examples` into `config.output`; returns the manifest written last."""
    started = time.time()
    source, source_sha256 = read_source(config)
    fn = choose_preprocessing(config, source)
    out = output_location(config.output)
    enable_tensorflow_filesystems([out.root])  # TFT writes and reads the transform graph with tf.io.gfile
    with out.staged_run():
        plan = _plan(config, source, out)
        features, facts = _execute(config, plan, fn, echo)
        return _finish(config, out, plan, features, {**facts, "source_sha256": source_sha256}, started, echo)


def output_location(root: str) -> OutputDir:
    """Transform's output directory and the items it owns there."""
    return OutputDir(root, owned=("Split-*", "statistics", TRANSFORM_GRAPH, PROVENANCE_DIR))


def _finish(config: TransformConfig, out: OutputDir, plan: TransformPlan, features: dict[str, FeatureSpec],
            run_facts: dict, started: float, echo: Callable[[str], None]) -> Manifest:
    staged_graph = out.staged(TRANSFORM_GRAPH)
    write_raw_metadata(staged_graph, plan.source)  # beside WriteTransformFn's output, as TFX's Transform does
    result = load_result(plan.scratch_dir)
    splits = split_infos(plan.source, plan.splits, result["shards"], result["batches"])
    labels = vocabulary_labels(plan.source.features) if config.preprocessing is None else []
    vocabularies = vocabulary_info(staged_graph, [n for n in labels if n in features])
    unseen = unseen_labels(splits, vocabularies)
    if unseen and config.unseen_labels == "fail":
        raise UnseenLabelsError(unseen_message(unseen, plan.analyze_split) + "; unseen_labels=fail, no manifest written")
    masks = mask_classes(staged_graph, [n for n, f in features.items() if f.role == "mask"])
    # Examples keep their input's order: the input's row provenance holds for them as it is.
    provenance = copy_example_rows(config.examples, plan.source, plan.splits, out.staged(PROVENANCE_DIR))
    if provenance is not None:
        run_facts[PROVENANCE_KEY] = provenance
    manifest = _manifest(config, plan, features, splits, run_facts.pop("source_sha256"), {
        "vocabularies": vocabularies, "unseen_labels": unseen, "mask_classes": masks, **run_facts,
        "size": output_size(plan.source, splits), "seconds": round(time.time() - started, 3),
    })
    # Splits and statistics (as ExampleGen), then the transform graph; the manifest last.
    out.complete([f"Split-{s}" for s in plan.splits] + ["statistics", TRANSFORM_GRAPH, PROVENANCE_DIR],
                 manifest.to_json())
    echo(summary_text(manifest, time.time() - started))
    return manifest


def _manifest(config: TransformConfig, plan: TransformPlan, features: dict[str, FeatureSpec],
              splits: dict[str, SplitInfo], source_sha256: str, facts: dict) -> Manifest:
    source_manifest = storage.join(config.examples, MANIFEST_NAME)
    return Manifest(features=features, splits=splits, compression=plan.sizing.compression, extra={
        "component": "transform",
        "shardflow_version": __version__,
        "inputs": [{"path": source_manifest, "component": plan.source.extra.get("component"),
                    "sha256": source_sha256}],
        "options": options_json(config),
        "preprocessing": config.preprocessing or "default",
        "analyze_split": plan.analyze_split,
        "unseen_label_policy": config.unseen_labels,
        "transform_graph": TRANSFORM_GRAPH,
        "statistics": {s: f"statistics/{s}.pb" for s in splits},
        **facts,
    })
