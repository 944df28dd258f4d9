"""A stand-in for TensorFlow in the statistics process: TFDV's statistics and schema inference run without it.

TFDV imports TensorFlow in modules the statistics never run (file readers, skew detection, image
statistics) and uses it at run time for one pure helper, `tf.compat.as_bytes`, before it calls its C++
schema inference. Importing TensorFlow cost ~2 s of CPU and ~360 MB of RSS of the ~5 s and ~610 MB
of the statistics process (issue 33). `install()` makes `import tensorflow` (and its submodules) give
a module whose names are placeholders: they satisfy import-time uses (annotations, `tf.train.Example`
as a default argument) and raise `TensorFlowAbsent` when called, so a code path that does need
TensorFlow fails loudly instead of computing something else. `compat.as_bytes` and `as_text` are
real (TensorFlow's own two-line definitions).

The statistics process falls back to the real TensorFlow when anything fails under the stand-in
(statistics_process.py), and tests/example_gen/test_statistics_process.py compares the statistics and
schema written both ways byte for byte.

>>> tf = Placeholder("tensorflow")
>>> as_bytes("ä"), isinstance(tf.train.Example, Placeholder)
(b'\\xc3\\xa4', True)
>>> tf.io.gfile.exists("x")  # doctest: +IGNORE_EXCEPTION_DETAIL
Traceback (most recent call last):
TensorFlowAbsent: tensorflow.io.gfile.exists called: this process runs TFDV without TensorFlow
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any


class TensorFlowAbsent(RuntimeError):
    """A TensorFlow function was called in a process that runs without TensorFlow."""



class Placeholder:
    """Any TensorFlow name: attribute access gives more placeholders, calling one raises."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, name: str) -> "Placeholder":
        if name.startswith("__"):
            raise AttributeError(name)
        return Placeholder(f"{self._name}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TensorFlowAbsent(f"{self._name} called: this process runs TFDV without TensorFlow")

    def __mro_entries__(self, bases: tuple) -> tuple:  # a placeholder as a base class: plain object
        return (object,)


def as_bytes(bytes_or_text: bytes | str, encoding: str = "utf-8") -> bytes:
    """TensorFlow's `compat.as_bytes`."""
    if isinstance(bytes_or_text, bytearray):
        return bytes(bytes_or_text)
    if isinstance(bytes_or_text, str):
        return bytes_or_text.encode(encoding)
    if isinstance(bytes_or_text, bytes):
        return bytes_or_text
    raise TypeError(f"Expected binary or unicode string, got {bytes_or_text!r}")


def as_text(bytes_or_text: bytes | str, encoding: str = "utf-8") -> str:
    """TensorFlow's `compat.as_text`."""
    if isinstance(bytes_or_text, str):
        return bytes_or_text
    if isinstance(bytes_or_text, bytes):
        return bytes_or_text.decode(encoding)
    raise TypeError(f"Expected binary or unicode string, got {bytes_or_text!r}")


_REAL = {"tensorflow.compat": {"as_bytes": as_bytes, "as_text": as_text, "as_str": as_text}}


class StandIn(types.ModuleType):
    """`tensorflow` and its submodules in this process (after `install()`)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        real = _REAL.get(self.__name__, {}).get(name)
        if real is not None:
            return real
        if f"{self.__name__}.{name}" in _REAL:  # a submodule with real functions: import it
            return importlib.import_module(f"{self.__name__}.{name}")
        return Placeholder(f"{self.__name__}.{name}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname.split(".")[0] != "tensorflow":
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return StandIn(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__path__ = []  # type: ignore[attr-defined]


def install() -> importlib.abc.MetaPathFinder:
    """From now on `import tensorflow...` in this process gives the stand-in (call before TFDV is imported)."""
    finder = _Finder()
    sys.meta_path.insert(0, finder)
    return finder


def uninstall(finder: importlib.abc.MetaPathFinder) -> None:
    """Removes the stand-in and the modules it made (tests)."""
    sys.meta_path.remove(finder)
    for name in [m for m in sys.modules if m.split(".")[0] == "tensorflow"]:
        if isinstance(sys.modules[name], StandIn):
            del sys.modules[name]
