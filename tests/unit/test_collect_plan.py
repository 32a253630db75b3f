"""Unit tier: what collect() copies, decided without a cluster."""

from __future__ import annotations

import socket
from pathlib import Path

from raytrace_kit._driver.collect import _list_node, _plan, _same_directory, unanswered

ROOT = "/var/ray/session_1/logs/raytrace_kit"


def _listed(node_id: str, address: str, root: str) -> dict[str, object]:
    return {
        "node": {"NodeID": node_id, "NodeManagerAddress": address},
        "listing": {"root": root, "files": []},
    }


def test_nodes_sharing_a_directory_are_copied_once() -> None:
    """Nodes of one machine share the session directory: one copy, the others point to it."""
    listed = [
        _listed("a" * 56, "10.0.0.1", ROOT),
        _listed("b" * 56, "10.0.0.1", ROOT),
        _listed("c" * 56, "10.0.0.2", ROOT),  # same path, another machine
        {"node": {"NodeID": "d" * 56}, "error": "ActorDiedError"},
    ]
    assert _same_directory(listed) == {"b" * 56: "a" * 56}


def test_plan_appends_to_grown_files_and_skips_unchanged(tmp_path: Path) -> None:
    """Same inode and grown: fetch the new bytes only; unchanged: nothing; replaced: all."""
    (tmp_path / "events-a-1.jsonl").write_bytes(b"x" * 10)
    (tmp_path / "events-a-2.jsonl").write_bytes(b"y" * 5)
    (tmp_path / "events-a-3.jsonl").write_bytes(b"z" * 5)
    known = {
        "events-a-1.jsonl": {"inode": 1, "size": 10},
        "events-a-2.jsonl": {"inode": 2, "size": 5},
        "events-a-3.jsonl": {"inode": 3, "size": 5},
    }
    listing = {
        "root": "/x",
        "files": [
            ("events-a-1.jsonl", 25, 1),  # grew
            ("events-a-2.jsonl", 5, 2),  # unchanged
            ("events-a-3.jsonl", 4, 9),  # rotated: a new file under the name
            ("profiles/f.prof", 100, 4),  # new
        ],
    }
    wanted, record = _plan(listing, tmp_path, known)
    assert wanted == [
        ("events-a-1.jsonl", 10, 25),
        ("events-a-3.jsonl", 0, 4),
        ("profiles/f.prof", 0, 100),
    ]
    assert record["events-a-2.jsonl"] == {"inode": 2, "size": 5}


def test_a_node_whose_raylet_does_not_answer_is_reported_without_a_task(tmp_path: Path) -> None:
    """A node killed without warning: its raylet's closed port says so, and no task waits.

    Ray still counts such a node alive until its health checks fail (15 s by default).
    """
    with socket.socket() as probe:  # a port that was open a moment ago, closed now
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    node = {"NodeID": "e" * 56, "NodeManagerAddress": "127.0.0.1", "NodeManagerPort": port}
    listed = _list_node(node, profiles=False, dest=tmp_path)  # Ray is not even running
    assert listed["node"] is node
    assert f"raylet at 127.0.0.1:{port} does not answer (ConnectionRefusedError" in listed["error"]


def test_a_node_whose_raylet_answers_is_asked(tmp_path: Path) -> None:
    """A raylet that accepts the connection: the node is then asked through a task."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        node = {
            "NodeID": "f" * 56,
            "NodeManagerAddress": "127.0.0.1",
            "NodeManagerPort": server.getsockname()[1],
        }
        assert unanswered(node) is None
