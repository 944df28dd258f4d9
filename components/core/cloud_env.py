"""One set of settings for object storage, reaching Beam, TensorFlow and plain Python alike.

Users configure S3 the standard AWS way (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY`, `AWS_DEFAULT_REGION`, `~/.aws`) and GCS with Application Default
Credentials. boto3 (Beam's S3 client) and google-cloud-storage read those themselves; TensorFlow
reads s3:// through tensorflow-io's filesystem plugin, which has its own variable names, so this
module maps one onto the other before TensorFlow first touches an s3:// path.

>>> env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_DEFAULT_REGION": "eu-west-1"}
>>> sorted(tensorflow_s3_settings(env).items())
[('AWS_REGION', 'eu-west-1'), ('S3_ENDPOINT', 'http://127.0.0.1:9000'), ('S3_USE_HTTPS', '0'), ('S3_VERIFY_SSL', '0')]
>>> redact_args(["--runner=X", "--s3_secret_access_key=abc", "--s3_access_key_id", "AKIA"])
['--runner=X', '--s3_secret_access_key=<redacted>', '--s3_access_key_id', '<redacted>']
"""
from __future__ import annotations

import atexit
import dataclasses
import logging
import os
import sys
from typing import Any, Iterable, Mapping

from .uri import scheme

SECRET_FLAGS = ("--s3_access_key_id", "--s3_secret_access_key", "--s3_session_token")


def tensorflow_s3_settings(env: Mapping[str, str]) -> dict[str, str]:
    """tensorflow-io's S3 variables derived from the AWS ones (those already set are kept)."""
    settings: dict[str, str] = {}
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    if endpoint and "S3_ENDPOINT" not in env:
        settings["S3_ENDPOINT"] = endpoint
        if endpoint.startswith("http://"):
            settings["S3_USE_HTTPS"] = "0"
            settings["S3_VERIFY_SSL"] = "0"
    region = env.get("AWS_DEFAULT_REGION") or env.get("AWS_REGION")
    if region and "AWS_REGION" not in env:
        settings["AWS_REGION"] = region
    return settings


def enable_tensorflow_filesystems(locations: Iterable[str]) -> None:
    """Makes TensorFlow able to open `locations`: registers s3:// (tensorflow-io) when one needs it.

    gs:// is built into TensorFlow. Safe to call many times; cheap when nothing is remote.
    """
    if not any(scheme(str(loc)) == "s3" for loc in locations):
        return
    for name, value in tensorflow_s3_settings(os.environ).items():
        os.environ.setdefault(name, value)
    import tensorflow_io  # noqa: F401  (registers the s3:// filesystem plugin with TensorFlow)


def used_tensorflow_io() -> bool:
    return "tensorflow_io" in sys.modules


_exit_status = [0]


def install_exit_guard() -> None:
    """Keeps the process's real exit status although tensorflow-io aborts in interpreter teardown.

    For process entry points only (the `shardflow` command, a KFP step): it replaces `sys.exit` and
    `sys.excepthook` and ends the process with `os._exit`, which a notebook or a library caller must
    never get as a side effect of reading s3://.

    tensorflow-io 0.37's s3 plugin aborts in C++ static destruction after any s3 use ("pure virtual
    method called", exit 134), after all work is done — which would fail a finished KFP step or CLI
    run. A last atexit handler records how Python was exiting (`sys.exit(code)`, or an uncaught
    exception) and leaves with `os._exit`, skipping the C++ teardown.
    """
    if getattr(sys, "_shardflow_exit_guard", False):
        return
    sys._shardflow_exit_guard = True  # type: ignore[attr-defined]
    original_exit, original_hook = sys.exit, sys.excepthook

    def recording_exit(code: object = None) -> None:
        _exit_status[0] = code if isinstance(code, int) else (0 if code is None else 1)
        original_exit(code)

    def recording_hook(*exc_info: object) -> None:
        _exit_status[0] = 1
        original_hook(*exc_info)  # type: ignore[arg-type]

    def leave() -> None:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_exit_status[0])

    sys.exit, sys.excepthook = recording_exit, recording_hook  # type: ignore[assignment]
    atexit.register(leave)


def recorded_options(config: Any, leave_out: tuple[str, ...] = ()) -> dict[str, Any]:
    """A component's config as its outputs record it: every field but `leave_out`, Beam's secrets redacted.

    The one place a config becomes a record, so no component writes a credential into a manifest.
    """
    options = dataclasses.asdict(config)
    for name in leave_out:
        options.pop(name, None)
    if "beam_args" in options:
        options["beam_args"] = redact_args(options["beam_args"])
    return options


def redact_args(args: Iterable[str]) -> list[str]:
    """Beam flags with secret values replaced, for manifests, logs and error messages."""
    out: list[str] = []
    hide_next = False
    for arg in args:
        if hide_next:
            out.append("<redacted>")
            hide_next = False
            continue
        name, eq, _ = arg.partition("=")
        if name in SECRET_FLAGS:
            out.append(f"{name}=<redacted>" if eq else name)
            hide_next = not eq
        else:
            out.append(arg)
    return out
