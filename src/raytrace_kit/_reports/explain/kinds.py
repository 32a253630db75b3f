"""Each kind of Ray error in plain words: what happened, why, what to check, what to do.

The words come from Ray's own debugging guides (worker deaths, out-of-memory kills, lost
objects, stuck calls); ``errors.py`` links them to the failing call and its death.
"""

from __future__ import annotations

from raytrace_kit._reports.explain.explanation import Explanation
from raytrace_kit.exceptions import NotSerializableError, RaytraceKitError

__all__ = ["by_type"]


_OOM_CHECK = (
    "the calls' memory: open_session().calls(function=...) gives rss_growth_bytes per call",
    "Ray's record of the worker's exit: 'Reporting worker exit' in gcs_server.out, in the "
    "session's logs directory (raytrace-kit report reads it)",
)


def by_type(kind: type, text: str, init_failed: bool = False) -> Explanation:  # noqa: PLR0911 -- one answer per kind
    """What an error of ``kind`` means (``text``: its message; an actor's ``__init__`` failed?)."""
    from ray import exceptions as ray_errors  # noqa: PLC0415 -- Ray loads only to explain

    if issubclass(kind, ray_errors.OutOfMemoryError):
        return Explanation(
            "Out of memory",
            "Ray's memory monitor killed the worker: its node was running out of memory.",
            (
                "too many tasks at once for the node's memory",
                "one call using far more memory than expected",
                "memory that grows call after call in a process (a leak)",
            ),
            _OOM_CHECK,
            (
                "run fewer at once: ask for more CPUs or memory per task (num_cpus=, memory=)",
                "find what grows: @debuggable(profile='memray') on the function",
            ),
        )
    if issubclass(kind, ray_errors.WorkerCrashedError):
        return Explanation(
            "Worker died",
            "The process running the task died before it finished.",
            (
                "killed by the operating system's OOM killer (exit 137, SIGKILL)",
                "a crash in native code (exit 139, segmentation fault)",
                "sys.exit() or os._exit() in the task",
            ),
            (
                "the call: it has a call.start and no call.end (status 'interrupted')",
                *_OOM_CHECK,
                "dmesg on the node for 'Out of memory: Killed process'",
            ),
            (
                "give each task more memory, or run fewer at once",
                "for native crashes: faulthandler, or run the task in local mode under a debugger",
            ),
        )
    if issubclass(kind, ray_errors.ActorUnavailableError):
        return Explanation(
            "Actor unavailable",
            "The actor could not be reached for now (restarting, or its node unreachable).",
            ("the actor is restarting after a failure", "a network problem to its node"),
            ("'ray list actors' for its state",),
            ("retry the call; set max_task_retries on the actor to let Ray retry it",),
        )
    if issubclass(kind, ray_errors.RayActorError):
        return _actor_died(text, init_failed)
    if issubclass(kind, ray_errors.OwnerDiedError):
        return Explanation(
            "Owner died",
            "The process that created the object (its owner) died, so the object is gone.",
            ("the worker or driver that called .remote() or ray.put() exited or crashed",),
            ("which process owned it: the error names its address",),
            ("keep the owner alive while others use its refs; return values instead of refs",),
        )
    if issubclass(kind, ray_errors.ObjectLostError):
        return Explanation(
            "Object lost",
            "An object's copies were all lost (a node died, or it was evicted) and could not "
            "be rebuilt.",
            ("the node holding it died", "ray.put objects cannot be rebuilt by re-running"),
            ("'ray status' for dead nodes",),
            ("let the task that made it be retried (max_retries), or persist large results",),
        )
    if issubclass(kind, ray_errors.GetTimeoutError):
        return Explanation(
            "Timed out",
            "ray.get gave up waiting: the call had not finished within the timeout.",
            (
                "the call is slow, or stuck (a lock, a deadlock, waiting on itself)",
                "it never started: no node has the resources it asks for",
            ),
            (
                "the call's events: a call.start means it runs; none means it waits to be "
                "scheduled",
                "raytrace_kit.stacks(actor) shows where a debuggable actor is right now",
                "'ray status' for pending resource demands",
            ),
            ("raise the timeout if it is only slow; fix the resource request if it never starts",),
        )
    if issubclass(kind, ray_errors.TaskCancelledError):
        return Explanation("Cancelled", "The task was cancelled (ray.cancel) before it finished.")
    if issubclass(kind, ray_errors.NodeDiedError | ray_errors.RaySystemError):
        return Explanation(
            "Ray system error",
            f"Ray itself failed: {text.splitlines()[0] if text else kind.__name__}.",
            ("a node died, or a Ray process crashed",),
            ("'ray status', and the logs in the session directory",),
        )
    if issubclass(kind, NotSerializableError):
        return Explanation(
            "Not serializable",
            "Ray could not serialize something the call needs; nothing was submitted.",
            check=(text,),
            fix=("create the object inside the task or actor, or pass what it is made from",),
        )
    if issubclass(kind, RaytraceKitError):
        return Explanation(kind.__name__, text)
    return Explanation(kind.__name__, text or "an error without a message")


def _actor_died(text: str, init_failed: bool) -> Explanation:
    if init_failed:
        return Explanation(
            "Actor died",
            "The actor's __init__ raised, so the actor never started; every call fails.",
            ("the error inside the message: the constructor's exception and traceback",),
            ("the actor_init call's events: its call.end has the traceback",),
            ("fix the constructor; Ray does not retry a failing __init__ unless max_restarts",),
        )
    if "ray.kill" in text:
        what = "The actor was killed with ray.kill; its pending and later calls fail."
    elif "INTENDED_USER_EXIT" in text or "exit_actor" in text:
        what = "The actor ended itself (ray.actor.exit_actor() or sys.exit())."
    elif "NODE_OUT_OF_MEMORY" in text:
        what = "Ray's memory monitor killed the actor's process: its node ran low on memory."
    else:
        what = "The actor's process died (crashed, killed, or its node died)."
    return Explanation(
        "Actor died",
        what,
        ("killed (ray.kill, the OOM killer), ended itself, crashed, or lost its node",),
        ("the actor's last calls: one with status 'interrupted' is where it died", *_OOM_CHECK),
        ("max_restarts and max_task_retries let Ray restart it and retry its calls",),
    )
