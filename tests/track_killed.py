"""`shardflow track`'s send SIGKILLed before each of its MLflow client calls in turn, then sent again.

    python tests/track_killed.py OUTPUT TRACKING_URI RESULT.json PREFIX [K,K,...]

MLflow and shardflow are imported once; each attempt is a forked process (so a kill lands in a sender that
holds its own connections) that sends OUTPUT into its own experiment and registered model `PREFIXkilled-K`, counting
every public MlflowClient call and SIGKILLing itself just before call K; then another forked process sends
the same again, whole. First, one uninterrupted send (`PREFIXreference`) counts the calls. RESULT.json: {"calls": N,
"killed": [K, ...] (the attempts that died by SIGKILL), "resent": [K, ...] (resends that exited 0)}.
"""
from __future__ import annotations

import functools
import json
import os
import signal
import sys
from typing import Any, Callable

from mlflow.tracking import MlflowClient

from shardflow.tracking import TrackConfig
from shardflow.tracking import run as track

CALLS = [0]


def _counted(method: Callable[..., Any], kill_at: int | None) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        CALLS[0] += 1
        if CALLS[0] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)  # just before this call: what came before is all the server has
        return method(*args, **kwargs)
    return call


def _in_child(output: str, uri: str, name: str, kill_at: int | None, counted: str | None = None) -> int:
    """Forks a sender; its wait status."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            for attribute in [a for a in vars(MlflowClient) if not a.startswith("_")]:
                if callable(getattr(MlflowClient, attribute)):
                    setattr(MlflowClient, attribute, _counted(getattr(MlflowClient, attribute), kill_at))
            track(TrackConfig(output=output, tracking_uri=uri, experiment=name, registered_model=name),
                  echo=lambda _: None)
            if counted:
                with open(counted, "w") as written:
                    written.write(str(CALLS[0]))
            code = 0
        finally:
            os._exit(code)
    return os.waitpid(pid, 0)[1]


def main() -> int:
    output, uri, result, prefix = sys.argv[1:5]
    only = {int(k) for k in sys.argv[5].split(",")} if len(sys.argv) > 5 else None  # a few points, to look at
    counted = result + ".calls"
    assert _in_child(output, uri, f"{prefix}reference", None, counted) == 0
    calls = int(open(counted).read())
    killed, resent = [], []
    for kill_at in [k for k in range(1, calls + 1) if only is None or k in only]:
        name = f"{prefix}killed-{kill_at}"
        status = _in_child(output, uri, name, kill_at)
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
            killed.append(kill_at)
        if _in_child(output, uri, name, None) == 0:
            resent.append(kill_at)
    with open(result, "w") as written:
        json.dump({"calls": calls, "killed": killed, "resent": resent}, written)
    return 0


if __name__ == "__main__":
    sys.exit(main())
