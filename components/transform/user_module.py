"""Loading a user's `preprocessing_fn` from `path/to/module.py:function` or `package.module:function`.

tensorflow-transform traces the function inside a Beam worker (TF2 mode), so the function travels
pickled. A module loaded from a file is registered with Beam's cloudpickle to travel by value:
workers need not import it (they could not: it is not on their path). Such a file must be
self-contained apart from installed packages; an installed module travels by reference as usual.

    fn = load_function("my_project/prep.py", "preprocessing_fn")
    fn = load_function("my_package.prep", "preprocessing_fn")
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Callable

from apache_beam.internal.cloudpickle import cloudpickle

from ..core.errors import ConfigError


def is_file_reference(module: str) -> bool:
    """A path (has a separator or ends in .py) rather than a dotted module name."""
    return module.endswith(".py") or "/" in module or "\\" in module


def _load_file(path_text: str) -> ModuleType:
    path = Path(path_text).resolve()
    if not path.is_file():
        raise ConfigError(f"preprocessing module file {path_text!r} does not exist")
    # A name unique per file, so two files called prep.py do not replace each other in sys.modules.
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    name = f"shardflow_user_{path.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"preprocessing module file {path_text!r} cannot be loaded as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look modules up by name
    spec.loader.exec_module(module)
    cloudpickle.register_pickle_by_value(module)
    return module


def _load_installed(name: str) -> ModuleType:
    if importlib.util.find_spec(name) is None:
        raise ConfigError(f"preprocessing module {name!r} is not importable (not installed, not on sys.path); "
                          "give a file path such as path/to/module.py:function instead")
    return importlib.import_module(name)


def load_function(module: str, function: str) -> Callable:
    """The callable `function` of the module file or importable module `module`."""
    loaded = _load_file(module) if is_file_reference(module) else _load_installed(module)
    fn = getattr(loaded, function, None)
    if fn is None:
        raise ConfigError(f"preprocessing module {module!r} has no attribute {function!r}")
    if not callable(fn):
        raise ConfigError(f"preprocessing {module}:{function} is a {type(fn).__name__}, not a function")
    return fn
