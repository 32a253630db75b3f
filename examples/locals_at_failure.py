"""See what a failed task's variables were, without a debugger waiting on the worker.

When a debuggable call fails, its `call.end` keeps, for each frame of your code in the
traceback, the names of its locals with their types and shapes (`qty: int`,
`rows: DataFrame of 1000x12`); with `log_args=True`, short reprs of their values too,
secret-looking names redacted. `raytrace-kit report`, `raytrace-kit explain --task ID` and
the HTML report show them under each frame. Nothing is done for calls that succeed.

Run: python examples/locals_at_failure.py   (starts its own local Ray)
"""

from __future__ import annotations

import ray

import raytrace_kit
from raytrace_kit import debuggable


def discounted(total: float, qty: int, discount: float) -> float:
    per_item = total / qty  # fails for an empty order
    return per_item * (1 - discount)


@debuggable  # types and shapes only: no value of yours is written
@ray.remote(max_retries=0)
def price(qty: int, api_token: str) -> float:
    discount = 0.5
    return discounted(100.0, qty, discount)


@debuggable(log_args=True)  # values too: bounded reprs, secret-looking names redacted
@ray.remote(max_retries=0)
def price_shown(qty: int, api_token: str) -> float:
    discount = 0.5
    return discounted(100.0, qty, discount)


def main() -> None:
    token = "tok-example-not-a-secret"  # noqa: S105 -- an example value: never written
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        for function in (price, price_shown):
            try:
                ray.get(function.remote(0, api_token=token))
            except ZeroDivisionError as error:  # expected: an empty order
                print(f"--- {function.__name__} failed; what raytrace_kit recorded of it:")
                print(raytrace_kit.explain(error))  # the call's traceback, locals under frames
        print("\nThe same from a shell: raytrace-kit report, raytrace-kit explain --task ID")
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
