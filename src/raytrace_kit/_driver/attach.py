"""Attach to a running Ray cluster from a process that did not start it, as it was started.

A cluster started by a plain ``ray.init()`` on Ray 2.60 wants a token (token
authentication is on by default, the token in Ray's own file) while the user's shell
exports nothing; one started with ``RAY_AUTH_MODE=disabled`` takes none, and drops the
actors of a driver that sends one. So the kit asks the cluster before joining it: first
without a token, then with this machine's, each a single request to its GCS, and joins with
the mode that was let in. Whatever cannot be made to work fails within seconds, in one
line that says why and what to do, instead of Ray's 20 s of C++ retries.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator

import ray

from raytrace_kit._ray_compat import cluster
from raytrace_kit.exceptions import ClusterConnectionError

__all__ = ["attached"]

_ANSWER_SECONDS = 3.0  # how long the GCS may take to accept a connection, and to answer


@contextlib.contextmanager
def attached(address: str) -> Iterator[str]:
    """Ray connected to the cluster at ``address`` for the block's time; yields its ``HOST:PORT``.

    ``address`` is ``HOST:PORT`` or ``auto`` (``RAY_ADDRESS``, else the cluster
    ``ray start`` recorded, else the one running here). On leaving, Ray is shut down and
    ``RAY_AUTH_MODE`` is put back as it was, so a later ``ray.init()`` of the user's
    starts its cluster as it would have.

    Raises:
        ClusterConnectionError: No cluster there, or it cannot be joined (its ``reason``
            and message say why, with the fix).
    """
    before = os.environ.get(cluster.AUTH_MODE)
    try:
        target = _address(address)
        _answers(target)
        _authenticate(target, before)
        try:
            ray.init(address=target, log_to_driver=False, logging_level="ERROR")
        except ConnectionError as exc:
            msg = f"Ray could not join the cluster at {target}: {exc}"
            raise ClusterConnectionError(msg, "unreachable") from exc
        yield target
    finally:
        ray.shutdown()
        if os.environ.get(cluster.AUTH_MODE) != before:
            cluster.set_auth_mode(before)


def _address(address: str) -> str:
    try:
        target = cluster.bootstrap_address(address)
    except ValueError as exc:
        msg = f"{address!r} is not a cluster's address: give HOST:PORT (the GCS's), or auto"
        raise ClusterConnectionError(msg, "no-address") from exc
    if target is None:
        msg = (
            "no Ray cluster is running on this machine (and RAY_ADDRESS is not set): start "
            "the program first, or give the cluster's address with --address HOST:PORT"
        )
        raise ClusterConnectionError(msg, "no-address")
    return target


def _answers(target: str) -> None:
    """Fail at once when nothing listens at ``target``, and within seconds when it is silent."""
    host, _, port = target.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=_ANSWER_SECONDS).close()
    except ConnectionRefusedError as exc:
        msg = (
            f"nothing listens at {target} (connection refused): no Ray cluster runs there "
            "now. Check the address (the head's GCS port, 6379 for ray start), or that the "
            "program is still running"
        )
        raise ClusterConnectionError(msg, "refused") from exc
    except OSError as exc:  # a timeout, no route, an unknown host
        msg = (
            f"{target} does not answer ({type(exc).__name__}: {exc or 'timed out'}): the host "
            "is down, unreachable from here, or a firewall drops the port"
        )
        raise ClusterConnectionError(msg, "unreachable") from exc


def _authenticate(target: str, chosen: str | None) -> None:
    """Set this process's auth mode to one the cluster lets in, and check its versions."""
    # Not has_token() first: once Ray's loader has read the token, this process sends it
    # whatever the mode, and a cluster without token authentication drops its actors.
    if chosen is not None or not cluster.has_token_auth():
        modes: list[str | None] = [None]  # as the shell says, or a Ray without tokens
    else:
        modes = ["disabled", "token"]
    token_mode = chosen is not None and chosen.lower() == "token" and cluster.has_token_auth()
    if token_mode and not cluster.has_token():  # Ray would abort the process: say why instead
        raise ClusterConnectionError(_refusal(target, chosen), "authentication")
    refused = cluster.authentication_error()
    for mode in modes:
        if mode == "token" and not cluster.has_token():
            break  # Ray aborts the process in token mode without a token: refused, said why
        if mode is not None:
            cluster.set_auth_mode(mode)
        try:
            found = cluster.metadata(target, _ANSWER_SECONDS)
        except TimeoutError as exc:
            msg = (
                f"{target} accepts connections but does not answer as a Ray cluster's GCS "
                f"({exc}): check the address (the head's GCS port, 6379 for ray start)"
            )
            raise ClusterConnectionError(msg, "unreachable") from exc
        except Exception as exc:
            if refused is not None and isinstance(exc, refused):
                continue
            msg = f"the cluster at {target} did not answer as a Ray cluster: {exc}"
            raise ClusterConnectionError(msg.splitlines()[0], "unreachable") from exc
        mismatch = cluster.version_mismatch(found)
        if mismatch is not None:
            msg = (
                f"the cluster at {target} runs Ray {found.get('ray_version')} on Python "
                f"{found.get('python_version')}, this command another ({_versions()}): run "
                "raytrace-kit from the cluster's Python environment (Ray joins only its own "
                "version)"
            )
            raise ClusterConnectionError(msg, "version")
        return
    raise ClusterConnectionError(_refusal(target, chosen), "authentication")


def _versions() -> str:
    import platform  # noqa: PLC0415

    return f"Ray {ray.__version__}, Python {platform.python_version()}"


def _refusal(target: str, chosen: str | None) -> str:
    """Why the cluster refused, in one line, with the fix."""
    fix = (
        "give this machine the cluster's token: `ray get-auth-token` on its head node prints "
        "it; put it in ~/.ray/auth_token, or set RAY_AUTH_TOKEN_PATH to a file holding it"
    )
    if chosen is not None and chosen.lower() != "token":
        return (
            f"authentication refused: RAY_AUTH_MODE={chosen} in this shell, and the cluster "
            f"at {target} requires a token. Unset RAY_AUTH_MODE (the kit then sends this "
            "machine's Ray token), or " + fix
        )
    if not cluster.has_token():
        return (
            f"authentication refused: the cluster at {target} requires a token, and this "
            "machine has none (no ~/.ray/auth_token, RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH). "
            "To fix it, " + fix
        )
    return (
        f"authentication refused: the cluster at {target} does not accept this machine's "
        "Ray token (it was started with another one). To fix it, " + fix
    )
