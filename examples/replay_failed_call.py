"""Run a call that failed on the cluster again, on your machine: same code, same arguments.

With `capture="failures"` (or `raytrace-kit run --capture failures`), a call that fails
keeps its pickled arguments, and an actor method its actor's state, in a file only you can
read (mode 0600, under the session's log dir); its record points to it. `raytrace-kit
replay ID` runs the call again in a new process, in local mode: the same exception from
the same line, exit code 1; `--pdb` stops there. Calls that succeed keep nothing.

This example fails a task and an actor method, then replays each with the command (and
the task once more under pdb, driven through its stdin) and checks what they print.

Run: python examples/replay_failed_call.py   (starts its own local Ray)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import ray

import raytrace_kit
from raytrace_kit import debuggable


@debuggable(capture="failures")
@ray.remote(max_retries=0)
def checkout(qty: int, api_token: str) -> float:
    discount = 0.5
    return 100 * discount / qty  # fails for an empty order


@debuggable(capture="failures")
@ray.remote(max_restarts=0)
class Shop:
    def __init__(self) -> None:
        self.prices = {"apple": 1.5}
        self.sold = 0

    def sell(self, item: str) -> float:
        self.sold += 1
        return self.prices[item]


def replay(
    call_id: str, source: Path, *options: str, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """``raytrace-kit replay CALL_ID SOURCE OPTIONS``, as you would type it."""
    command = [sys.executable, "-m", "raytrace_kit", "replay", call_id, str(source), *options]
    return subprocess.run(  # noqa: S603 -- the kit's own command, with ids it wrote
        command, input=stdin, capture_output=True, text=True, check=False
    )


def failed_call_id(source: Path, function: str) -> str:
    """The id of the failed call of ``function``, as ``raytrace-kit events`` shows it."""
    (call,) = raytrace_kit.open_session(source).calls(function=function, status="error")
    return call.call_id


def show(title: str, done: subprocess.CompletedProcess[str], text: str) -> None:
    print(f"\n$ {title}   (exit code {done.returncode})")
    print("\n".join(text.strip().splitlines()[-5:]))


def main() -> None:
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    source = raytrace_kit.log_dir()
    try:
        try:
            ray.get(checkout.remote(0, api_token="tok-example-not-a-secret"))  # noqa: S106
        except ZeroDivisionError:
            print("checkout failed on a worker")
        shop = Shop.remote()
        ray.get(shop.sell.remote("apple"))
        try:
            ray.get(shop.sell.remote("pear"))
        except KeyError:
            print("Shop.sell failed on its actor")
    finally:
        ray.shutdown()  # the replays need no cluster

    task = replay(failed_call_id(source, "checkout"), source)
    show("raytrace-kit replay <checkout's call id>", task, task.stderr)
    assert task.returncode == 1
    assert task.stderr.rstrip().endswith("ZeroDivisionError: float division by zero")

    method = replay(failed_call_id(source, "Shop.sell"), source)
    show("raytrace-kit replay <Shop.sell's call id>", method, method.stderr)
    assert method.returncode == 1
    assert method.stderr.rstrip().endswith("KeyError: 'pear'")

    typed = "p qty\np discount\nq\n"
    debugged = replay(failed_call_id(source, "checkout"), source, "--pdb", stdin=typed)
    show("raytrace-kit replay <checkout's call id> --pdb   (typed: p qty, p discount, q)",
         debugged, debugged.stdout)  # fmt: skip
    assert "(Pdb) 0\n(Pdb) 0.5" in debugged.stdout


if __name__ == "__main__":
    main()
