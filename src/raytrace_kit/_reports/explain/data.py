"""What Ray Data's errors mean, from their printed text: the UDF they are about, and the fix.

Ray Data runs the functions and callable classes passed to ``map_batches``, ``map``,
``flat_map``, ``filter``... inside its own tasks and actors, so its errors speak of its
machinery: a UDF that captures something unpicklable fails as ``TypeError: Could not
serialize the put value <...MapTransformer...>`` (with Ray's ``inspect_serializability``
dump, through ``ray.data.exceptions.SystemException``); a UDF that raises is a
``RayTaskError(UserCodeException)`` of a task named after its operators
(``ray::ReadRange->MapBatches(parse)()``); a pipeline without progress for
``execution_no_progress_timeout_s`` ends with ``ExecutionTimeoutError``. Each is named
here for what it is, with the UDF where the text names it.
"""

from __future__ import annotations

import re

from raytrace_kit._reports.explain.explanation import Explanation

__all__ = ["explain_data_text", "udfs_of"]

# An operator of a Ray Data task's name: "MapBatches(parse)", "Map(<lambda>)", "Filter(keep)".
_OPERATOR = re.compile(r"\b(?P<op>MapBatches|MapRows|Map|FlatMap|Filter|AddColumn|MapGroups|"
                       r"Project|Write\w*)\((?P<udf>[^()]*)\)")  # fmt: skip
_DATA_TASK = re.compile(r"ray::(?P<name>[\w<>]+(?:\([^()]*\))?(?:->[\w<>]+(?:\([^()]*\))?)*)\(\)")
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)')
_FRAME_IN = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>[\w<>]+)')
_ATTEMPTS = re.compile(r"after (\d+)/(\d+) attempts")
_BUILDS = re.compile(r"\.(?:map_batches|map|flat_map|filter|add_column|map_groups)\(")
_UNPICKLABLE = re.compile(r"cannot pickle '(?P<type>[^']+)' object")
_RAISED = re.compile(r"^(?:[\w.]+\.)?(?P<name>[A-Za-z_]\w*): (?P<message>.*)$", re.MULTILINE)
_FIX_CAPTURE = (
    "make the object inside the UDF, not around it: a callable class opens it once per "
    "actor in __init__ (ds.map_batches(Enricher, concurrency=2)), and its constructor "
    "takes what it needs to make it (a path, a URL), not the object",
    "find every captured value that cannot be pickled, with its path: "
    "raytrace_kit.check_serializable(udf)",
)


def udfs_of(text: str) -> list[str]:
    """The UDFs a Ray Data task's name names, in operator order (``MapBatches(parse)``)."""
    found = []
    for match in _DATA_TASK.finditer(text):
        for operator in _OPERATOR.finditer(match["name"]):
            if operator["udf"] and operator["udf"] not in found:
                found.append(operator["udf"])
    return found


def explain_data_text(text: str) -> Explanation | None:
    """What a Ray Data error's text means, or ``None`` if it is not one of Ray Data's."""
    if "Could not serialize the put value" in text and "MapTransformer" in text:
        return _not_serializable(text)
    if "ExecutionTimeoutError" in text:
        return Explanation(
            "Ray Data made no progress",
            "The dataset's execution stopped after no operator took or made a block for "
            "DataContext.execution_no_progress_timeout_s: a UDF is blocked, a task is stuck, "
            "or the cluster can no longer schedule the work.",
            ("a UDF waiting forever (a lock, a ray.get on an actor, I/O without a timeout)",
             "an actor pool stage whose actors cannot start (resources no node has)"),
            ("while it runs: raytrace-kit stuck names each call in flight, where it is and "
             "what it waits on",),
            ("give blocking calls in UDFs a timeout; ask for resources a node has",),
        )  # fmt: skip
    udfs = udfs_of(text)
    if not udfs:
        return None
    named = ", ".join(udfs)
    if "OutOfMemoryError" in text:
        return Explanation(
            "Out of memory in a Ray Data UDF",
            f"Ray's memory monitor killed a worker running {named}: its node was running out "
            "of memory while the UDF processed its batches.",
            ("batches too large for what the UDF holds per batch (its copies, its model)",
             "too many of the operator's tasks at once for the node's memory"),
            ("the UDF's memory per batch: raytrace-kit report's memory section",),
            ("a smaller batch_size in map_batches", "fewer at once: concurrency= on the "
             "stage, or memory= per task (ray_remote_args)"),
        )  # fmt: skip
    if "UserCodeException" in text:
        return _udf_failed(text, named)
    return None


def _planned_udfs(text: str) -> list[str]:
    """The UDFs of the plan Ray Data logged (``Execution plan of Dataset ...: ... [A->B]``)."""
    found: list[str] = []
    for line in text.splitlines():
        if "Execution plan of Dataset" in line:
            for operator in _OPERATOR.finditer(line):
                if operator["udf"] and operator["udf"] not in found:
                    found.append(f"{operator['udf']} ({operator[0]})")
    return found


def _user_line(text: str) -> str | None:
    """The user's line that built or ran the dataset, from the traceback (file:line: code)."""
    lines = text.splitlines()
    for at, line in enumerate(lines[:-1]):
        frame = _FRAME.match(line)
        if frame and "/ray/" not in frame["file"] and "site-packages" not in frame["file"]:
            code = lines[at + 1].strip()
            if _BUILDS.search(code):
                return f"{frame['file']}:{frame['line']}: {code}"
    return None


def _not_serializable(text: str) -> Explanation:
    found = _UNPICKLABLE.search(text)
    what = f" a {found['type']}" if found else " an object that cannot be pickled"
    udfs = _planned_udfs(text)
    which = f" (the plan's UDFs: {', '.join(udfs)})" if udfs else ""
    where = _user_line(text)
    at = f" The pipeline was built or run at {where}." if where else ""
    return Explanation(
        "Serialization: a Ray Data UDF cannot be shipped",
        "Ray Data could not send a function or callable class passed to map_batches, map, "
        f"flat_map or filter{which} to its workers: it captures{what} (a closure or a "
        f"global it uses). Nothing of the pipeline ran.{at}",
        ("a connection, lock, client or open file made outside the UDF and used inside it",
         "a callable class's constructor arguments (fn_constructor_args) holding one"),
        ("the first 'FAIL serialization' line of Ray's dump names the type",),
        _FIX_CAPTURE,
    )  # fmt: skip


def _udf_failed(text: str, named: str) -> Explanation:
    raised = [m for m in _RAISED.finditer(text) if "UserCodeException" not in m["name"]]
    cause = next((m for m in raised if m["name"] not in {"RayTaskError"}), None)
    said = f"{cause['name']}: {cause['message']}" if cause else "an exception"
    tries = _ATTEMPTS.search(text)
    if tries:
        attempts = f"after {tries[1]} of {tries[2]} attempt(s)"
    else:
        attempts = "after the attempts configured"
    where = _udf_line(text, named)
    at = f" at {where}" if where else ""
    return Explanation(
        "A Ray Data UDF failed",
        f"{named} raised {said} on a batch{at}; Ray Data failed the dataset {attempts}.",
        ("a batch the UDF does not expect (an empty batch, a missing column, a bad value)",),
        ("the traceback's first part: the last frame of your UDF is where it raised",),
        ("reproduce it on one batch here: batch = ds.take_batch(); then call the UDF on it "
         "(under pdb, or inside raytrace_kit.local_mode())",
         "to let a few bad blocks through instead: "
         "DataContext.get_current().max_errored_blocks = N"),
    )  # fmt: skip


def _udf_line(text: str, named: str) -> str | None:
    """``file:line`` of the innermost frame of a named UDF in the traceback, if any."""
    udfs = {name.strip() for name in named.split(",")}
    found = None
    for frame in _FRAME_IN.finditer(text):
        if frame["function"] in udfs:
            found = f"{frame['file']}:{frame['line']}"
    return found
