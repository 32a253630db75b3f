"""Ray's private record of what it exported at a remote function's first ``.remote()``.

Ray pickles a remote function once per cluster and job (its closure, and for a function
of ``__main__`` or a notebook the globals it uses), stores it in the GCS, and each worker
that runs the function fetches it. No public API says how large that pickle is.
"""

from __future__ import annotations

from typing import Any

__all__ = ["pickled_size"]


def pickled_size(remote_function: Any) -> int | None:
    """The bytes Ray pickled a ``RemoteFunction`` to; ``None`` before its first ``.remote()``.

    Read from the pickle Ray keeps (``_pickled_function``, made again for each new
    cluster or job): nothing is pickled again. A Ray that keeps none gives ``None``.
    """
    pickled = getattr(remote_function, "_pickled_function", None)
    return len(pickled) if isinstance(pickled, bytes) else None
