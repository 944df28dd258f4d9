"""Configs are keyword-only frozen dataclasses (issue 34): `ExampleGenConfig(output=..., indexes=...)`, never
positional, so a field added or moved cannot silently shift the values of a call.

Read with ast, nothing imported: every dataclass of a components/*/config.py whose name ends in `Config`, and
the option classes `OPTION_CLASSES`, are declared `@dataclass(frozen=True, kw_only=True)`. Parsed values
(`IndexSpec`, `Threshold`, `Regression`) and results are records, not option groups: positional is fine there.
"""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OPTION_CLASSES = {"components/core/shard_writer.py": ["ShardSizing"], "components/core/folds.py": ["FoldSelection"],
                  "components/core/stream_options.py": ["StreamOptions"],
                  "components/trainer/config.py": ["InputOptions", "ModelOptions", "FitOptions", "ExportOptions"],
                  "pipelines/cluster_options.py": ["ClusterOptions"]}


def dataclass_flags(source: str) -> dict[str, set[str]]:
    """Each dataclass of `source`: the keyword flags set True in its decorator.

    >>> found = dataclass_flags("@dataclass(frozen=True, kw_only=True)\\nclass A:\\n    x: int\\n")
    >>> {name: sorted(flags) for name, flags in found.items()}  # sorted: a set's order varies with the hash seed
    {'A': ['frozen', 'kw_only']}
    """
    found = {}
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        for decorator in node.decorator_list:
            call = decorator if isinstance(decorator, ast.Call) else None
            name = getattr(call.func if call else decorator, "id", None)
            if name == "dataclass":
                found[node.name] = {k.arg for k in (call.keywords if call else ())
                                    if isinstance(k.value, ast.Constant) and k.value.value is True}
    return found


def configs() -> dict[str, set[str]]:
    """`path:Class` → its flags, for every config and option class the rule covers."""
    covered = {}
    for path in sorted((REPO / "components").glob("*/config.py")):
        for name, flags in dataclass_flags(path.read_text(encoding="utf-8")).items():
            if name.endswith("Config"):
                covered[f"{path.relative_to(REPO)}:{name}"] = flags
    for relative, names in OPTION_CLASSES.items():
        declared = dataclass_flags((REPO / relative).read_text(encoding="utf-8"))
        covered.update({f"{relative}:{name}": declared[name] for name in names})
    return covered


def test_every_config_is_a_keyword_only_frozen_dataclass() -> None:
    covered = configs()
    assert len(covered) >= 18  # ten components' configs (the Trainer's too) and eight option classes
    assert {where: flags for where, flags in covered.items() if not {"frozen", "kw_only"} <= flags} == {}


def test_the_generated_local_run_config_is_keyword_only_and_frozen() -> None:
    """LocalRunConfig's fields come from the step table (make_dataclass): checked on the class, not the source."""
    import dataclasses

    from shardflow.pipelines.local_run import LocalRunConfig

    assert LocalRunConfig.__dataclass_params__.frozen
    assert all(field.kw_only for field in dataclasses.fields(LocalRunConfig))
    assert {"train_options", "evaluate_options", "eval_gate", "bootstrap_seed"} <= set(LocalRunConfig.__dataclass_fields__)


def test_a_positional_config_is_caught() -> None:
    planted = dataclass_flags("@dataclass(frozen=True)\nclass PlantedConfig:\n    output: str\n")
    assert not {"frozen", "kw_only"} <= planted["PlantedConfig"]
