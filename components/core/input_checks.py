"""What is wrong with a directory given as a component's input, said as the user would fix it.

Each returns None when the input looks right, else the message's tail (the caller names the option).

>>> import tempfile
>>> examples_problem(tempfile.mkdtemp())
'is not ExampleGen output (no manifest.json) — run example-gen first'
>>> examples_problem("/nonexistent/examples")
'does not exist'
"""
from __future__ import annotations

from . import storage
from .errors import ConfigError
from .manifest import MANIFEST_NAME
from .model_info import MODEL_INFO_NAME

TRANSFORM_GRAPH_DIR = "transform_graph"  # Transform's output holds it beside its manifest


def examples_problem(location: str, transform_ok: bool = False) -> str | None:
    """None for a complete ExampleGen output (or a Transform output when `transform_ok`)."""
    if storage.is_file(location):
        return "is a file, not an output directory"
    if not storage.is_dir(location):
        return "does not exist"
    if not storage.is_file(storage.join(location, MANIFEST_NAME)):
        if transform_ok:
            return f"is not ExampleGen or Transform output (no {MANIFEST_NAME}) — run example-gen first"
        return f"is not ExampleGen output (no {MANIFEST_NAME}) — run example-gen first"
    if not transform_ok and storage.is_dir(storage.join(location, TRANSFORM_GRAPH_DIR)):
        return "holds Transform outputs; pass ExampleGen's output"
    return None


def model_problem(location: str) -> str | None:
    """None unless `location` is clearly not a model: missing, a file, or a training output (its model/ is named)."""
    if storage.is_file(storage.join(location, MODEL_INFO_NAME)):
        return None
    if storage.is_file(location):
        return "is a file, not a model directory"
    if not storage.is_dir(location):
        return "does not exist"
    inner = storage.join(location, "model")
    if storage.is_file(storage.join(inner, MODEL_INFO_NAME)):
        return f"is a training output, not the model in it; did you mean {inner}?"
    return None  # some other directory: loading it says what it lacks (an evaluation failure, exit 1)


def check_examples(location: str, transform_ok: bool = False, option: str = "examples") -> None:
    """ConfigError naming `option` unless `location` is a complete ExampleGen (or Transform) output."""
    problem = examples_problem(location, transform_ok)
    if problem:
        raise ConfigError(f"{option} {location!r} {problem}")


def check_model(location: str, option: str = "model") -> None:
    """ConfigError naming `option` when `location` is clearly not an exported model."""
    problem = model_problem(location)
    if problem:
        raise ConfigError(f"{option} {location!r} {problem}")
