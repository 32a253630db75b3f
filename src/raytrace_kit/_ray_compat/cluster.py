"""Ray's private API for connecting to a running cluster: its address, auth mode, versions.

Ray has no public way to ask a cluster, before joining it, whether it wants a token or
which Ray it runs: ``ray.init(address=...)`` retries a refused connection for about 20 s,
printing a C++ log line a second, then fails with "Failed to connect". Its own CLI finds
the mode by trying. Here, one request to the cluster's GCS (``ray._raylet.GcsClient``,
which fails at once with Ray's ``AuthenticationError`` when refused) answers each question
in milliseconds, and the mode Ray's config caches at import is refreshed
(``ray._raylet.Config.initialize``), as Ray's own ``_enable_token_auth`` does.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

import ray
import ray._private.services
import ray._private.utils
import ray._raylet

__all__ = [
    "AUTH_MODE",
    "authentication_error",
    "bootstrap_address",
    "has_token",
    "has_token_auth",
    "metadata",
    "set_auth_mode",
    "version_mismatch",
]

AUTH_MODE = "RAY_AUTH_MODE"

# A line of Ray's C++ log ("[2026-12-01 21:13:31,642 W 2531 2531] gcs_client.cc:210: ..."),
# as its GCS client writes one per failed try.
_CPP_LINE = re.compile(rb"^\[\d{4}-\d\d-\d\d [^\]]*\] [\w.]+\.(cc|h):\d+: .*\n?", re.M)


def has_token_auth() -> bool:
    """Whether this Ray knows token authentication (Ray 2.52 and later; not 2.40)."""
    return hasattr(ray._raylet, "AuthenticationTokenLoader")


def has_token() -> bool:
    """Whether this process can find a Ray token (``RAY_AUTH_TOKEN``, its path, or the file).

    Asked of Ray's own loader, whatever the mode; the token itself is never read here.
    Ask only to say why a cluster refused: once the loader has read the token, Ray sends
    it on every connection of this process, even with ``RAY_AUTH_MODE=disabled``.
    """
    if not has_token_auth():
        return False
    loader = ray._raylet.AuthenticationTokenLoader.instance()
    return bool(loader.has_token(ignore_auth_mode=True))


def set_auth_mode(mode: str | None) -> None:
    """Set ``RAY_AUTH_MODE`` here and in children (``None``: unset), and make Ray read it.

    Ray caches its config when ``ray`` is imported; setting the variable alone changes
    nothing until the config is initialized anew.
    """
    if mode is None:
        os.environ.pop(AUTH_MODE, None)
    else:
        os.environ[AUTH_MODE] = mode
    if has_token_auth():
        ray._raylet.Config.initialize("")


def authentication_error() -> type[BaseException] | None:
    """Ray's ``AuthenticationError`` (``None`` on Rays without token authentication)."""
    return getattr(ray.exceptions, "AuthenticationError", None)


def bootstrap_address(address: str) -> str | None:
    """``HOST:PORT`` of the cluster ``address`` names (``auto``: as ``ray.init`` finds it).

    ``auto`` reads ``RAY_ADDRESS``, then the cluster ``ray start`` recorded, then any GCS
    running here; ``None`` if none is found. A ``HOST:PORT`` is returned with ``localhost``
    resolved, as Ray connects to it.

    Raises:
        ValueError: ``address`` is not of Ray's form.
    """
    try:
        found = ray._private.services.canonicalize_bootstrap_address(address)
    except ConnectionError:  # "auto" and nothing found
        return None
    return None if found is None else str(found)


@contextlib.contextmanager
def _quiet_cpp_lines() -> Iterator[None]:
    """Keep Ray's C++ log lines off stderr (the caller says why it failed); pass the rest on.

    The GCS client logs from C++ to file descriptor 2, which Python cannot filter: the
    descriptor is pointed at a file for the request's few milliseconds, then what was
    written there, less those lines, is passed on.
    """
    try:
        saved = os.dup(2)
    except OSError:  # no stderr at all: nothing to keep quiet
        yield
        return
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            rest = _CPP_LINE.sub(b"", caught.read())
            if rest:
                os.write(2, rest)


def metadata(address: str, timeout: float) -> dict[str, Any]:
    """The cluster's metadata (its Ray and Python versions), asked with this process's auth.

    One request to the GCS. Ray's client waits up to 40 s for a port that accepts
    connections and never answers, and no setting shortens it: the request runs on a
    thread of its own, given up on after ``timeout`` seconds (the thread ends when Ray's
    wait does).

    Raises:
        TimeoutError: No answer within ``timeout``.
        Exception: What Ray raises: its ``AuthenticationError`` when the cluster refuses
            this process's token or lack of one.
    """
    try:
        from ray._common.usage import usage_lib  # noqa: PLC0415 -- where Ray 2.60 keeps it
    except ImportError:  # Ray 2.40
        from ray._private.usage import usage_lib  # noqa: PLC0415

    answer: list[Any] = []

    def ask() -> None:
        try:
            client = ray._raylet.GcsClient(address=address)
            answer.append(dict(usage_lib.get_cluster_metadata(client) or {}))
        except BaseException as exc:  # handed to the caller
            answer.append(exc)

    asking = threading.Thread(target=ask, name="raytrace_kit.attach", daemon=True)
    with _quiet_cpp_lines():
        asking.start()
        asking.join(timeout)
    if not answer:
        msg = f"no answer within {timeout:g} s"
        raise TimeoutError(msg)
    if isinstance(answer[0], BaseException):
        raise answer[0]
    return answer[0]  # type: ignore[no-any-return]


def version_mismatch(cluster: dict[str, Any]) -> str | None:
    """Ray's own message if the cluster's Ray or Python differs from this process's."""
    if not cluster.get("ray_version"):
        return None  # nothing recorded: ray.init decides
    try:
        ray._private.utils.check_version_info(cluster, "this process")
    except Exception as exc:  # Ray raises a bare Exception/RuntimeError with its message
        return str(exc)
    return None
