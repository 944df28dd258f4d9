"""A Dockerfile's build, without a Docker daemon: the build context from `.dockerignore`, then the build
stage's COPY and RUN lines carried out into a folder that stands for the image's root.

No daemon runs here and no base image can be pulled, so the base image's Python is this machine's
python3.11 (the image's `python:3.11-slim`), and the stage's absolute paths (/opt, /src, /tmp) are
mapped under `root`. `pip install` runs as `uv pip install` into the same venv: the same packages
from the same lock, from uv's cache instead of a download (the image sets PIP_NO_CACHE_DIR).

    stages = parse(Path("k8s/Dockerfile").read_text())
    context = build_context(REPO, Path("k8s/Dockerfile.dockerignore"), tmp / "context")
    env = run_stage(stages[0], context, tmp / "root")      # BuildFailed names the line that failed
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path


class BuildFailed(Exception):
    """A Dockerfile line failed: the message names it and ends with the command's last output lines."""


@dataclass
class Stage:
    base: str
    name: str = ""
    instructions: list[tuple[str, str]] = field(default_factory=list)  # (KEYWORD, arguments)


def parse(text: str) -> list[Stage]:
    """The stages of a Dockerfile: continuation lines joined, comments dropped, ARG defaults in FROM."""
    joined = re.sub(r"\\\n", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in filter(None, (raw.strip() for raw in joined.splitlines())):
        keyword, _, rest = line.partition(" ")
        keyword, rest = keyword.upper(), rest.strip()
        if keyword == "ARG" and not stages:
            name, _, default = rest.partition("=")
            args[name] = default
        elif keyword == "FROM":
            base, _, name = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m[1], ""), rest).partition(" AS ")
            stages.append(Stage(base.strip(), name.strip()))
        else:
            stages[-1].instructions.append((keyword, rest))
    return stages


def _pattern(glob: str) -> re.Pattern[str]:
    """A .dockerignore pattern (Go's filepath.Match plus `**`) as a regular expression."""
    out, i = "", 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif glob.startswith("**", i):
            out, i = out + ".*", i + 2
        else:
            out += {"*": "[^/]*", "?": "[^/]"}.get(glob[i], re.escape(glob[i]))
            i += 1
    return re.compile(out + r"\Z")


def _included(path: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Docker's rule: the last pattern that matches the path or one of its parent folders decides."""
    parts = path.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    included = True
    for keep, pattern in rules:
        if any(pattern.match(prefix) for prefix in prefixes):
            included = keep
    return included


def build_context(repo: Path, dockerignore: Path, target: Path) -> Path:
    """The files `docker build` would send from a clone of `repo` (git's files), filtered by `dockerignore`."""
    rules = []
    for line in dockerignore.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keep = line.startswith("!")
            rules.append((keep, _pattern(os.path.normpath(line.lstrip("!")).lstrip("/"))))
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=repo, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if _included(name, rules) and (repo / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(repo / name, target / name)
    return target


_ABSOLUTE = re.compile(r"(?<![\w.$/-])/(opt|src|tmp)(?=[/\s:]|$)")


def _mapped(text: str, root: Path) -> str:
    return _ABSOLUTE.sub(lambda m: f"{root}/{m[1]}", text)


def _copy(arguments: str, context: Path, root: Path) -> None:
    *sources, destination = arguments.split()
    if any(s.startswith("--") for s in sources):
        raise BuildFailed(f"COPY {arguments}: flags are not carried out here")
    for source in sources:
        found = context / source
        if not found.exists():
            raise BuildFailed(f"COPY {arguments}: {source!r} not found in the build context "
                              "(missing, or excluded by .dockerignore)")
        target = Path(_mapped(destination, root))
        if found.is_dir():
            shutil.copytree(found, target, dirs_exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(found, target / found.name if destination.endswith("/") else target)


def _shell(command: str, root: Path) -> str:
    """A RUN line as it runs here: paths under `root`, this machine's python3.11, pip through uv's cache."""
    command = _mapped(command, root)
    command = re.sub(r"\bpython -m venv\b", f"{shutil.which('python3.11')} -m venv", command)
    return re.sub(r"\bpip install\b", 'uv pip install --python "$(command -v python)"', command)


def run_stage(stage: Stage, context: Path, root: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """Carries out the stage's ENV, WORKDIR, COPY and RUN lines; returns the environment it leaves."""
    env = dict(env if env is not None else os.environ)
    env.pop("VIRTUAL_ENV", None)
    for keyword, arguments in stage.instructions:
        if keyword == "ENV":
            _set_env(env, arguments, root)
        elif keyword == "COPY":
            _copy(arguments, context, root)
        elif keyword == "RUN":
            done = subprocess.run(["bash", "-ec", _shell(arguments, root)], env=env, capture_output=True, text=True)
            if done.returncode:
                tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-5:])
                raise BuildFailed(f"RUN {arguments}: exit {done.returncode}\n{tail}")
    return env


def final_env(stage: Stage, root: Path, build_env: dict[str, str]) -> dict[str, str]:
    """The environment of the final stage's ENV lines, over the build stage's."""
    env = dict(build_env)
    for keyword, arguments in stage.instructions:
        if keyword == "ENV":
            _set_env(env, arguments, root)
    return env


def _set_env(env: dict[str, str], arguments: str, root: Path) -> None:
    for name, value in re.findall(r"(\w+)=(\S+)", arguments):
        env[name] = _mapped(value, root).replace("$PATH", env.get("PATH", ""))
