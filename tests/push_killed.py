"""`shardflow push` that SIGKILLs itself at one stage of the push: a real kill at a known point, no hook in shardflow.

    python tests/push_killed.py STAGE -- push --model M --evaluation E --serving-dir S

STAGE: `claimed` (the version's claim written), `mid-copy` (half the model's files copied), `copied` (the copy
whole, locally renamed into place; the pointer not yet swapped), `swapped` (the pointer swapped, TF Serving's
model config not yet written). The storage functions the Pusher calls are wrapped in this process only.
"""
from __future__ import annotations

import os
import re
import signal
import sys

from shardflow.core import storage
from shardflow.pusher import MODEL_CONFIG, SERVING_POINTER

STAGES = ("claimed", "mid-copy", "copied", "swapped")


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _wrap(stage: str, serving: str) -> None:
    write_if, copy_file = storage.write_if, storage.copy_file
    claimed: list[int] = []  # this push's version, once claimed
    copied: list[str] = []

    def killing_write_if(location: str, data: bytes, expected: str | None) -> str:
        own_swap = (storage.basename(location) == SERVING_POINTER and claimed
                    and re.search(rf'"version": {claimed[0]}[,\n]'.encode(), data) is not None)
        if stage == "copied" and own_swap:
            _die()  # the copy is whole (and renamed, locally), the swap not made
        token = write_if(location, data, expected)
        if "/.claims/" in location:
            claimed.append(int(storage.basename(location)))
            if stage == "claimed":
                _die()
        if stage == "swapped" and own_swap:
            _die()  # the pointer names the new version; TF Serving's config does not yet
        return token

    def killing_copy_file(source: str, target: str) -> None:
        copy_file(source, target)
        if target.startswith(serving) and not target.endswith(MODEL_CONFIG):
            copied.append(target)
            if stage == "mid-copy" and len(copied) == 2:
                _die()

    storage.write_if, storage.copy_file = killing_write_if, killing_copy_file


def main() -> int:
    stage, argv = sys.argv[1], sys.argv[sys.argv.index("--") + 1:]
    assert stage in STAGES, stage
    _wrap(stage, argv[argv.index("--serving-dir") + 1])
    from shardflow.cli import main as shardflow_main

    return shardflow_main(argv)


if __name__ == "__main__":
    sys.exit(main())
