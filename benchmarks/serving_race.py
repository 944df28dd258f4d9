"""What TF Serving would serve while pushes race: with the model config Push writes, and with the newest folder.

Two pusher processes push TRIALS pairs of models gated against the same served one (one wins, one is refused),
while two poller processes read the serving directory every few ms the two ways TF Serving can be pointed at it:
`--model_config_file` (the version `models.config` names, parsed by TF Serving's own proto) and
`--model_base_path` (the newest integer-named folder). Each poll records the version it would load and whether
that is a whole model and a trial's winner. A model here is a small tree whose every file names its tag, so a
copy is whole exactly when all its files are there and carry one tag.

The models, the pushers, the pollers and what a server would load are the serving tests' oracle
(testkit/serving_oracle.py), so the race is judged as the tests judge a push; only the race itself is here.

    python -m benchmarks.run_all --only serving --serving-trials 20
"""
from __future__ import annotations

import multiprocessing
import time
from typing import Any

from shardflow.core import storage
from testkit.serving_oracle import POLICIES, poll_served, pusher, race_trials


def race(root: str, trials: int, spread: float) -> dict[str, Any]:
    """The race with one poller per policy; {"winners": [...], "seen": {policy: [observations]}}."""
    serving = storage.join(root, "serving")
    context = multiprocessing.get_context("spawn")  # no fork of a process that may hold TensorFlow
    results, stop = context.Queue(), context.Event()
    queues = {name: context.Queue() for name in ("a", "b")}
    found = {policy: context.Queue() for policy in POLICIES}
    processes = [context.Process(target=pusher, args=(name, serving, tasks, results), daemon=True)
                 for name, tasks in queues.items()]
    processes += [context.Process(target=poll_served, args=(serving, stop, found[p], p), daemon=True) for p in POLICIES]
    for process in processes:
        process.start()
    try:
        assert all(found[policy].get(timeout=120) == "ready" for policy in POLICIES)
        assert sorted(results.get(timeout=120) for _ in queues) == [("ready", "a"), ("ready", "b")]
        winners = race_trials(root, serving, queues, results, trials, spread)
        time.sleep(0.2)  # the pollers see the last winner
    finally:
        stop.set()
        for tasks in queues.values():
            tasks.put(None)
        for process in processes:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
    seen = {policy: list(iter(lambda q=found[policy]: q.get(timeout=30), "done")) for policy in POLICIES}
    return {"winners": winners, "seen": seen, "exit_codes": [p.exitcode for p in processes]}
