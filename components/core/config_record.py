"""A config as a component's outputs record it: every option, Beam's secret flags redacted.

The one place a config becomes a record, so no component writes a credential into a manifest.

>>> redact_args(["--runner=X", "--s3_secret_access_key=abc", "--s3_access_key_id", "AKIA"])
['--runner=X', '--s3_secret_access_key=<redacted>', '--s3_access_key_id', '<redacted>']
"""
from __future__ import annotations

import dataclasses
from typing import Any, Iterable

SECRET_FLAGS = ("--s3_access_key_id", "--s3_secret_access_key", "--s3_session_token")


def recorded_options(config: Any, leave_out: tuple[str, ...] = ()) -> dict[str, Any]:
    """A component's config as its outputs record it: every field but `leave_out`, Beam's secrets redacted."""
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
