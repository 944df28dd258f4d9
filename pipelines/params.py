"""Pipeline parameters given on the command line (`--param NAME=VALUE`), checked against the IR.

    params = parse_param_args(["times=3", "word=x=y"])        # {"times": "3", "word": "x=y"}
    typed_params(spec, params)                                # {"times": 3, "word": "x=y"}: the IR's types
    typed_params(spec, params, require_all=False)             # compile-time defaults: some may stay unset

`spec` is a compiled pipeline as a dict (the YAML, or the PipelineSpec proto as JSON). LIST and
STRUCT values are JSON: `--param 'index=["train=/data/train.csv"]'`.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..core.errors import ConfigError


def parse_param_args(pairs: list[str]) -> dict[str, str]:
    """`["a=1", "b=x=y"]` -> {"a": "1", "b": "x=y"}; a repeated name is an error."""
    params: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise ConfigError(f"--param expects NAME=VALUE, got {pair!r}")
        if name in params:
            raise ConfigError(f"--param {name} is given twice")
        params[name] = value
    return params


def declared_parameters(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The pipeline's input parameters: name -> {parameterType, defaultValue?, isOptional?}."""
    return dict(spec["root"].get("inputDefinitions", {}).get("parameters", {}))


def required_parameters(spec: Mapping[str, Any]) -> list[str]:
    """The parameters a run must be given: no default in the IR."""
    return sorted(name for name, info in declared_parameters(spec).items()
                  if "defaultValue" not in info and not info.get("isOptional"))


def typed_params(spec: Mapping[str, Any], params: Mapping[str, Any], require_all: bool = True) -> dict[str, Any]:
    """Checks `params` against the pipeline's inputs and converts text values to the declared types.

    `require_all`: every parameter without a default must be given (a run); False for compile-time defaults.
    """
    declared = declared_parameters(spec)
    unknown = sorted(set(params) - set(declared))
    if unknown:
        raise ConfigError(f"--param: the pipeline has no parameter {', '.join(unknown)}; "
                          f"its parameters: {', '.join(sorted(declared)) or '(none)'}")
    missing = [name for name in required_parameters(spec) if name not in params]
    if missing and require_all:
        raise ConfigError(f"--param: the pipeline parameter(s) {', '.join(missing)} have no default; "
                          "pass --param NAME=VALUE")
    return {name: _typed(name, value, declared[name].get("parameterType", "STRING")) for name, value in params.items()}


def _typed(name: str, value: Any, kind: str) -> Any:
    if not isinstance(value, str) or kind == "STRING":
        return value
    try:
        if kind == "NUMBER_INTEGER":
            return int(value)
        if kind == "NUMBER_DOUBLE":
            return float(value)
        if kind == "BOOLEAN" and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if kind in ("LIST", "STRUCT"):
            parsed = json.loads(value)
            if isinstance(parsed, list if kind == "LIST" else dict):
                return parsed
    except ValueError:
        pass
    raise ConfigError(f"--param {name}={value!r}: the pipeline declares {name} as {kind}"
                      + (" (JSON, e.g. '[\"a\", \"b\"]')" if kind in ("LIST", "STRUCT") else ""))
