"""A job that hangs, and why: a deadlock between two actors, named by raytrace_kit.stuck().

Two actors call each other back: ``Ledger.transfer`` waits on ``Auditor.check``, which
calls ``Ledger.balance`` on the ledger, which is busy running ``transfer`` (an actor runs
one call at a time). Nothing fails; the job just never ends. Beside it, a task asks for a
GPU no node has: it will never start either.

``raytrace_kit.stuck()`` (or ``raytrace-kit stuck`` from another shell) names the cycle
call by call with the lines they wait at, says why the GPU task waits, and how to fix
both. Then the example ends the actors, so it finishes.

Run: python examples/stuck_deadlock.py
"""

from __future__ import annotations

import time

import ray

import raytrace_kit
from raytrace_kit import debuggable


@debuggable
@ray.remote
class Ledger:
    def __init__(self) -> None:
        self.total = 100

    def transfer(self, auditor, amount: int) -> int:
        if not ray.get(auditor.check.remote(amount)):  # waits for the auditor...
            return self.total
        self.total -= amount
        return self.total

    def balance(self) -> int:
        return self.total


@debuggable
@ray.remote
class Auditor:
    def __init__(self, ledger) -> None:
        self.ledger = ledger

    def check(self, amount: int) -> bool:
        return ray.get(self.ledger.balance.remote()) >= amount  # ...which waits for the ledger


@debuggable
@ray.remote(num_gpus=1)
def train() -> str:
    return "trained"


def main() -> None:
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    ledger = Ledger.remote()
    auditor = Auditor.remote(ledger)
    transfer = ledger.transfer.remote(auditor, 10)
    trained = train.remote()

    # The job now hangs. Look, until the cycle has formed (a few seconds at most).
    found = raytrace_kit.stuck()
    deadline = time.monotonic() + 60
    while not found.deadlocks and time.monotonic() < deadline:
        time.sleep(0.2)
        found = raytrace_kit.stuck()
    print(found)

    assert len(found.deadlocks) == 1, "the deadlock was not found"
    names = [call.function.rsplit(".", 2)[-2:] for call in found.deadlocks[0]]
    assert names == [["Ledger", "transfer"], ["Auditor", "check"], ["Ledger", "balance"]]
    assert [call.function.rsplit(".", 1)[-1] for call in found.infeasible] == ["train"]

    ray.cancel(trained)
    for actor in (ledger, auditor):
        ray.kill(actor)
    try:
        ray.get(transfer)
    except ray.exceptions.RayActorError:
        print("\nThe actors were ended; the transfer never completed.")
    ray.shutdown()


if __name__ == "__main__":
    main()
