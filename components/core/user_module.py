"""Loading a user's function from `path/to/module.py:function`, `s3://bucket/module.py:function` or `package.module:function`.

Used for Transform's `preprocessing_fn` and the Trainer's model hook. A module file is read through
`storage` (a local path or a URI alike) and executed into a fresh module, registered with Beam's
cloudpickle to travel by value: workers need not import it (they could not: it is not on their
path, and a worker may not see the launcher's disk). Such a file must be self-contained apart from
installed packages; an installed module travels by reference as usual.

    fn = load_function("my_project/prep.py", "preprocessing_fn")
    fn = load_function("s3://bucket/code/prep.py", "preprocessing_fn")
    fn = load_function("my_package.prep", "preprocessing_fn")
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
import types
from typing import Callable

from . import storage
from .errors import ConfigError
from .uri import basename, is_remote


def is_file_reference(module: str) -> bool:
    """A path or URI (has a separator or ends in .py) rather than a dotted module name."""
    return module.endswith(".py") or "/" in module or "\\" in module


def _load_file(location: str) -> types.ModuleType:
    where = location if is_remote(location) else os.path.realpath(location)
    try:
        source = storage.read_bytes(where)
    except (FileNotFoundError, IsADirectoryError):
        raise ConfigError(f"module file {location!r} does not exist") from None
    # A name unique per file, so two files called prep.py do not replace each other in sys.modules.
    digest = hashlib.sha256(where.encode()).hexdigest()[:12]
    stem = basename(where).rsplit(".", 1)[0]
    name = f"shardflow_user_{''.join(c if c.isalnum() else '_' for c in stem)}_{digest}"
    try:
        code = compile(source, where, "exec")
    except SyntaxError as err:
        raise ConfigError(f"module file {location!r} is not valid Python: {err}") from None
    module = types.ModuleType(name)
    module.__file__ = where
    sys.modules[name] = module  # dataclasses and pickling look modules up by name
    exec(code, module.__dict__)  # noqa: S102 (the user's own module, as `import` would run it)
    from apache_beam.internal.cloudpickle import cloudpickle  # Beam's pickler: only needed for user code

    cloudpickle.register_pickle_by_value(module)
    return module


def _load_installed(name: str) -> types.ModuleType:
    if importlib.util.find_spec(name) is None:
        raise ConfigError(f"module {name!r} is not importable (not installed, not on sys.path); "
                          "give a file path such as path/to/module.py:function instead")
    return importlib.import_module(name)


def load_function(module: str, function: str) -> Callable:
    """The callable `function` of the module file (path or URI) or importable module `module`."""
    loaded = _load_file(module) if is_file_reference(module) else _load_installed(module)
    fn = getattr(loaded, function, None)
    if fn is None:
        raise ConfigError(f"module {module!r} has no attribute {function!r}")
    if not callable(fn):
        raise ConfigError(f"{module}:{function} is a {type(fn).__name__}, not a function")
    return fn
