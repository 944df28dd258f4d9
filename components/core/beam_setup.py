"""Building a Beam pipeline from pass-through options, defaulting to the local FnApiRunner.

Beam's plain DirectRunner first tries the Prism runner, which downloads a binary (and fails
offline), so without `--runner` we run on the FnApiRunner explicitly. Runs with enough work use
its multi-process mode unless the user chose a mode: worker start-up (5-10 s) only pays off there.
The caller estimates the work (ExampleGen: example_gen/work_estimate.py), not only counts rows.

>>> options = pipeline_options(["--direct_num_workers=2"], work_seconds=0.7)
>>> options.view_as(DirectOptions).direct_running_mode
'in_memory'
"""
from __future__ import annotations

import os

import apache_beam as beam
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner

from .beam_introspection import memoize_function_arguments

# Single-core seconds of work from which worker processes pay off. Measured on 28×28 PNGs (~70 µs
# a row): equal total time at 200k rows (14 s of work), 1.3x faster at 1M.
MULTI_PROCESS_MIN_WORK_SECONDS = 14.0
# Threads start in milliseconds, but share the GIL: they are chosen when most of the work runs in
# C code that releases it (Pillow's and TurboJPEG's decode, resize and encode of photos). Measured
# on 8k photo rows (~20 s of work), 2 cores, whole runs: 1 thread 34.2 s, 2 threads 25.3 s,
# 2 processes 24.8 s (their start-up paid back by ExampleGen importing TFDV meanwhile, which beside
# encoding threads stalls them on the GIL): threads below ~20 s of work, processes above.
MULTI_THREAD_MIN_WORK_SECONDS = 2.0
MULTI_THREAD_MIN_GIL_FREE = 0.8
MULTI_THREAD_MAX_WORK_SECONDS = 20.0


DASK_RUNNER = "DaskRunner"
MAX_DASK_PARTITIONS = 64


def pipeline_options(beam_args: list[str] | tuple[str, ...], work_seconds: float = 0.0,
                     num_chunks: int = 1, gil_free: float = 0.0) -> PipelineOptions:
    """Options from the user's Beam flags; without a running mode, one chosen from the estimated work.

    `work_seconds` is the single-core CPU time the run is expected to take, `gil_free` the part of it
    spent in code that releases the GIL (see `local_running_mode`).
    On Dask, `Create` puts up to 128 elements in one partition and `Reshuffle` does not move them,
    so unless the user set `--dask_npartitions`, each unit of work gets its own partition (capped).
    """
    args = list(beam_args)
    options = PipelineOptions(args)
    runner = str(options.view_as(StandardOptions).runner or "")
    if runner.endswith(DASK_RUNNER) and not any(a.startswith("--dask_npartitions") for a in args):
        args.append(f"--dask_npartitions={max(1, min(num_chunks, MAX_DASK_PARTITIONS))}")
        options = PipelineOptions(args)
    local = options.view_as(StandardOptions).runner is None
    if local and not any(a.startswith("--direct_running_mode") for a in args):
        mode = local_running_mode(work_seconds, gil_free, os.cpu_count() or 1)
        args.append(f"--direct_running_mode={mode}")
        if mode != "in_memory" and not any(a.startswith("--direct_num_workers") for a in args):
            args.append(f"--direct_num_workers={os.cpu_count()}")
        options = PipelineOptions(args)
    return options


def local_running_mode(work_seconds: float, gil_free: float, cpus: int) -> str:
    """The FnApiRunner mode for a run of `work_seconds` single-core seconds, `gil_free` of them without the GIL.

    >>> local_running_mode(10.0, 0.97, 2), local_running_mode(50.0, 0.97, 2)  # photos: 4k and 20k rows
    ('multi_threading', 'multi_processing')
    >>> local_running_mode(15.0, 0.2, 2), local_running_mode(5.0, 0.2, 2)     # 28×28 PNGs: 200k and 70k rows
    ('multi_processing', 'in_memory')
    """
    if cpus < 2 or work_seconds < MULTI_THREAD_MIN_WORK_SECONDS:
        return "in_memory"
    if gil_free >= MULTI_THREAD_MIN_GIL_FREE and work_seconds < MULTI_THREAD_MAX_WORK_SECONDS:
        return "multi_threading"
    return "multi_processing" if work_seconds >= MULTI_PROCESS_MIN_WORK_SECONDS else "in_memory"


def make_pipeline(options: PipelineOptions) -> beam.Pipeline:
    """A pipeline on the user's runner, or on the FnApiRunner when none is named."""
    memoize_function_arguments()  # its graph is built next: ~1 s less of Beam's introspection (beam_introspection)
    if options.view_as(StandardOptions).runner is None:
        return beam.Pipeline(runner=FnApiRunner(), options=options)
    return beam.Pipeline(options=options)


def close_dask_client(pipeline: beam.Pipeline) -> None:
    """The DaskRunner leaves its client open; close it so in-process callers do not see reconnects."""
    client = getattr(getattr(pipeline, "result", None), "client", None)
    if client is not None:
        client.close()


def runs_outside_the_launcher(options: PipelineOptions) -> bool:
    """Whether the pipeline's work runs in other processes or machines, leaving this process idle."""
    if options.view_as(StandardOptions).runner is not None:
        return True
    return options.view_as(DirectOptions).direct_running_mode == "multi_processing"


def describe_runner(options: PipelineOptions) -> str:
    runner = options.view_as(StandardOptions).runner
    if runner is not None:
        return str(runner)
    direct = options.view_as(DirectOptions)
    return f"FnApiRunner({direct.direct_running_mode}, workers={direct.direct_num_workers})"
