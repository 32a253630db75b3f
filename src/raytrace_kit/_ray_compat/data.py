"""What the kit reads of Ray Data's private members: an operator's name, in two places.

Ray Data names each operator of a pipeline (``MapBatches(clean)``), and fuses adjacent map
operators into one physical operator (``MapBatches(parse)->MapBatches(clean)``) that runs
both UDFs in one task. No public API gives either name: the dataset a method returns keeps
its logical plan (``Dataset._logical_plan.dag``, a ``LogicalOperator`` with ``name`` and
``input_dependencies``, in Ray 2.40 to 2.60), and a running map task keeps its
``TaskContext`` in a thread-local (``TaskContext.get_current()``, 2.44 on; older versions
pass it only as an argument, and the physical name is then unknown).
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["current_operator", "operator_of"]


def operator_of(dataset: Any) -> tuple[str | None, tuple[str, ...]]:
    """The logical operator ``dataset`` ends with, and the names of its inputs.

    ``(None, ())`` when this Ray Data keeps its plan elsewhere.
    """
    try:
        operator = dataset._logical_plan.dag
        inputs = tuple(str(parent.name) for parent in operator.input_dependencies)
        return str(operator.name), inputs
    except Exception:  # another Ray Data: no names, the calls are still recorded
        return None, ()


def current_operator() -> str | None:
    """The physical (maybe fused) operator of the map task running in this thread, if known."""
    current = _task_context_getter()
    if current is None:
        return None
    try:
        name = getattr(current(), "op_name", None)
    except Exception:
        return None
    return None if name is None else str(name)


@functools.cache
def _task_context_getter() -> Any:
    try:
        from ray.data._internal.execution.interfaces.task_context import (  # noqa: PLC0415
            TaskContext,
        )
    except Exception:  # Ray Data moved it: the physical name is unknown
        return None
    return getattr(TaskContext, "get_current", None)  # Ray Data before 2.44: none
