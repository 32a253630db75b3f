"""``collect()``: bring every node's raytrace_kit files to the driver, through Ray itself.

One small task per alive node, pinned there (hard node affinity, no CPU), lists the
node's raytrace_kit directory and streams the requested files back in chunks, as a
streaming generator with backpressure, so a large profile capture never sits whole in
memory. Nodes are read in parallel (one driver thread each). No dashboard, no SSH.

A second run copies only what changed: an event file that grew gets its new bytes
appended (event files are append-only while their inode stays the same); a rotated or
rewritten file is copied again; an unchanged one is skipped. What was copied from where
is recorded in ``collect.json`` in the destination, with the nodes that could not be
read (dead, or failed) and why, and the cluster it came from (address, session directory).
"""

from __future__ import annotations

import functools
import json
import os
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from raytrace_kit import _ray_compat, _registry
from raytrace_kit._output import paths, writer
from raytrace_kit.exceptions import UsageError

__all__ = ["collect", "unanswered"]

_CHUNK = 8 * 1024 * 1024  # bytes per streamed piece: bounded memory on both sides
_RECORD = "collect.json"


def _list_files(profiles: bool, exclude: str) -> dict[str, Any]:
    """On the node: its raytrace_kit directory and the files in it (path, size, inode).

    ``exclude`` is the destination: collecting into the directory itself must not copy
    earlier copies again.
    """
    root = paths.log_dir()
    files = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or (not profiles and path.parent.name == "profiles"):
            continue
        if str(path).startswith(exclude + os.sep) or path.name == _RECORD:
            continue
        try:
            info = path.stat()
        except OSError:
            continue  # removed while listing
        files.append((str(path.relative_to(root)), info.st_size, info.st_ino))
    return {"root": str(root), "files": files}


def _read_files(root: str, wanted: list[tuple[str, int, int]]) -> Iterator[tuple[str, int, bytes]]:
    """On the node: stream ``(path, offset, bytes)`` of each wanted file, from ``offset``."""
    base = Path(root)
    for relative, start, size in wanted:
        position = start
        try:
            with (base / relative).open("rb") as handle:
                handle.seek(position)
                while position < size:
                    data = handle.read(min(_CHUNK, size - position))
                    if not data:
                        break
                    yield relative, position, data
                    position += len(data)
        except OSError:
            continue  # removed or rotated away since the listing: the next run gets it


@_registry.cleared_on_reset
@functools.cache
def _remotes() -> tuple[Any, Any]:
    remote = _ray_compat.ray_remote
    lister = _ray_compat.mark_kit_remote(remote(num_cpus=0, max_retries=0)(_list_files))
    reader = _ray_compat.mark_kit_remote(
        remote(num_cpus=0, max_retries=0, _generator_backpressure_num_objects=4)(_read_files)
    )
    return lister, reader


def _plan(
    listing: dict[str, Any], local: Path, known: dict[str, Any]
) -> tuple[list[tuple[str, int, int]], dict[str, Any]]:
    """Which files (from which offset) to fetch, and the record of what will be there."""
    wanted: list[tuple[str, int, int]] = []
    record: dict[str, Any] = {}
    for relative, size, inode in listing["files"]:
        target = local / relative
        have = target.stat().st_size if target.exists() else -1
        seen = known.get(relative)
        same_file = seen is not None and seen.get("inode") == inode and have == seen.get("size")
        if same_file and have == size:
            record[relative] = seen  # unchanged: nothing to copy
            continue
        grew = same_file and relative.endswith(".jsonl") and have < size
        wanted.append((relative, have if grew else 0, size))
        record[relative] = {"inode": inode, "size": size}
    return wanted, record


# How long a node's raylet may take to accept a connection before the node counts as gone.
_ANSWER_SECONDS = 3.0


def unanswered(node: dict[str, Any]) -> str | None:
    """Why the node's raylet does not answer, or ``None`` if it accepts a connection.

    A node killed without warning stays alive in ``ray.nodes()`` until its health checks
    fail (15 s by default), and a task pinned to it waits that long: its raylet's port,
    refused or silent, says so at once. Nothing is sent; the connection is closed.
    """
    address, port = node.get("NodeManagerAddress"), node.get("NodeManagerPort")
    if not address or not port:
        return None  # nothing to try: the task decides
    try:
        socket.create_connection((address, int(port)), timeout=_ANSWER_SECONDS).close()
    except OSError as exc:
        return (
            f"its raylet at {address}:{port} does not answer ({type(exc).__name__}: {exc}): "
            "the node is down or unreachable; Ray marks it dead after its health checks"
        )
    return None


def _list_node(node: dict[str, Any], profiles: bool, dest: Path) -> dict[str, Any]:
    """Phase 1 on one node: what its directory holds (or why it could not be read)."""
    node_id = node["NodeID"]
    down = unanswered(node)
    if down is not None:
        return {"node": node, "error": down}
    strategy = NodeAffinitySchedulingStrategy(node_id, soft=False)
    lister, _ = _remotes()
    try:
        listing = ray.get(
            lister.options(scheduling_strategy=strategy).remote(profiles, str(dest.resolve()))
        )
    except Exception as exc:  # a node that dies or fails is reported, not raised
        return {"node": node, "error": f"{type(exc).__name__}: {exc}"[:500]}
    return {"node": node, "listing": listing}


def _copy_node(listed: dict[str, Any], dest: Path, known: dict[str, Any]) -> dict[str, Any]:
    """Phase 2 on one node: fetch what changed in its directory."""
    node = listed["node"]
    node_id = node["NodeID"]
    listing = listed["listing"]
    strategy = NodeAffinitySchedulingStrategy(node_id, soft=False)
    _, reader = _remotes()
    local = dest / f"node-{node_id[:12]}"
    started = time.monotonic()
    try:
        wanted, record = _plan(listing, local, known.get("files", {}))
        copied = 0
        if wanted:
            stream = reader.options(scheduling_strategy=strategy).remote(listing["root"], wanted)
            for ref in stream:
                relative, offset, data = ray.get(ref)
                target = local / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                # Created 0600, as on the node: a replay file holds a call's arguments.
                flags = os.O_WRONLY | os.O_CREAT | (0 if offset else os.O_TRUNC)
                with os.fdopen(os.open(target, flags, 0o600), "wb") as handle:
                    handle.seek(offset)
                    handle.write(data)
                    handle.truncate()
                copied += len(data)
    except Exception as exc:  # a node that dies or fails is reported, not raised
        return {
            "node_id": node_id,
            "status": "failed",
            "error": f"{type(exc).__name__}: {exc}"[:500],
            "files": known.get("files", {}),
        }
    return {
        "node_id": node_id,
        "status": "collected",
        "address": node.get("NodeManagerAddress"),
        "hostname": node.get("NodeManagerHostname"),  # spans' host.name (docs/otel.md)
        "source": listing["root"],
        "files": record,
        "bytes_copied": copied,
        "seconds": round(time.monotonic() - started, 3),
    }


def _same_directory(listed: list[dict[str, Any]]) -> dict[str, str]:
    """Nodes that read a directory another node reported first: node id -> that node.

    Nodes of one machine share the session's directory: it is copied once.
    """
    owner: dict[tuple[Any, str], str] = {}
    shared: dict[str, str] = {}
    for item in listed:
        if "listing" not in item:
            continue
        node = item["node"]
        key = (node.get("NodeManagerAddress"), item["listing"]["root"])
        first = owner.setdefault(key, node["NodeID"])
        if first != node["NodeID"]:
            shared[node["NodeID"]] = first
    return shared


def collect(dest: str | os.PathLike[str] | None = None, *, profiles: bool = True) -> Path:
    """Copy the raytrace_kit files of every alive node of the connected cluster here.

    Nodes are read in parallel, through Ray (a small task pinned to each node), without
    the dashboard or SSH. Run it again to fetch only what changed. Open the result with
    :func:`raytrace_kit.open_session`.

    Args:
        dest: Where to put the files (one ``node-<id>`` folder per node directory; nodes of
            one machine that share it are copied once). Default: a ``collected`` folder in
            the driver's Ray session directory.
        profiles: Also copy profile captures (they can be large; they are streamed).

    Raises:
        UsageError: Ray is not initialized (there is no cluster to collect from).

    Returns:
        The destination directory. Nodes that are dead or could not be read are listed in
        its ``collect.json`` and named in one warning; they do not make this fail.
    """
    if not ray.is_initialized():
        msg = (
            "collect() copies files from the nodes of a Ray cluster, and Ray is not "
            "initialized. Call ray.init(address=...) first, or open a session directory "
            "with open_session(path)."
        )
        raise UsageError(msg)
    target = Path(dest) if dest is not None else paths.session_dir() / "collected"
    target.mkdir(parents=True, exist_ok=True)
    record_path = target / _RECORD
    try:
        previous = json.loads(record_path.read_text())["nodes"]
    except (OSError, ValueError, KeyError, TypeError):
        previous = {}
    nodes = ray.nodes()
    alive = [node for node in nodes if node.get("Alive")]
    results: dict[str, Any] = {
        node["NodeID"]: {
            "node_id": node["NodeID"],
            "status": "dead",
            "files": previous.get(node["NodeID"], {}).get("files", {}),
        }
        for node in nodes
        if not node.get("Alive")
    }
    with ThreadPoolExecutor(max_workers=max(1, len(alive))) as pool:
        listed = list(pool.map(lambda node: _list_node(node, profiles, target), alive))
        shared = _same_directory(listed)
        for item in listed:
            node_id = item["node"]["NodeID"]
            if "error" in item:
                results[node_id] = {"node_id": node_id, "status": "failed", "error": item["error"]}
            elif node_id in shared:
                results[node_id] = {
                    "node_id": node_id,
                    "status": "same directory as",
                    "node": shared[node_id],
                }
        copies = [
            item for item in listed if "listing" in item and item["node"]["NodeID"] not in shared
        ]
        for result in pool.map(
            lambda item: _copy_node(item, target, previous.get(item["node"]["NodeID"], {})), copies
        ):
            results[result["node_id"]] = result
    # Which cluster it came from: `raytrace-kit` names it when it reads the folder.
    cluster = {
        "address": ray.get_runtime_context().gcs_address,
        "session_dir": str(paths.session_dir()),
    }
    record_path.write_text(json.dumps({"cluster": cluster, "nodes": results}, indent=1))
    missing = [r for r in results.values() if r["status"] in {"dead", "failed"}]
    if missing:
        names = ", ".join(f"{r['node_id'][:12]} ({r['status']})" for r in missing)
        writer.warn(
            f"raytrace_kit.collect(): could not read {len(missing)} node(s): {names}; "
            f"see {record_path}.",
            stacklevel=2,
        )
    return target
