"""``DebuggableFunction``: the proxy of a remote function, ``pin=True`` runners included."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from typing_extensions import ParamSpec

from raytrace_kit import _process, _ray_compat
from raytrace_kit._driver import pinning
from raytrace_kit._driver.proxy import Debuggable, make_remote
from raytrace_kit._driver.stacks import stacks as actor_stacks
from raytrace_kit._local import run as local_run
from raytrace_kit._local.arguments import check_call
from raytrace_kit._local.retry import Retry
from raytrace_kit._local.setting import LocalConfig
from raytrace_kit._options import CallSpec, Pin, qualified_name
from raytrace_kit._worker.instrument import instrument_function
from raytrace_kit._worker.stacks import ProcessStacks
from raytrace_kit.exceptions import InvalidOptionError, UsageError

if TYPE_CHECKING:
    from ray.remote_function import RemoteFunction

    from raytrace_kit._worker.runner import PinnedWorker

__all__ = ["DebuggableFunction"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


class DebuggableFunction(Debuggable, Generic[_P, _R]):
    """A Ray remote function whose every execution is instrumented in its worker.

    It behaves like the ``RemoteFunction`` it wraps: ``.remote(...)`` returns exactly what
    Ray returns, ``.options(...)`` takes Ray's options, other attributes fall through to
    the wrapped object (``__wrapped__``). ``.with_debug(...)`` changes raytrace_kit's
    options for the calls made through the copy it returns.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self._options.profile_scope == "actor":
            msg = (
                f"profile_scope='actor' applies to actor classes, and {self.__qualname__} is a "
                "function: use profile_scope='call' (one capture per call), or decorate the "
                "actor class that holds the state you are watching."
            )
            raise InvalidOptionError(msg, "profile_scope")
        # Filled on first use: (spec, num_returns, generator) and the pinned call target.
        self._call_info: tuple[CallSpec, Any, bool, str | None] | None = None
        self._pinned_target: tuple[Any, Any, int | CallSpec] | None = None
        self._local_retry: Retry | None = None

    def remote(self, *args: _P.args, **kwargs: _P.kwargs) -> Any:
        """Submit the task; returns an ``ObjectRef``, a list of them, or a generator.

        In local mode the call runs here and now, and the refs hold its outcome.
        """
        return self._submit(args, kwargs)

    def _info(self) -> tuple[CallSpec, Any, bool, str | None]:
        """The call spec, ``num_returns``, whether a generator, ``.options(name=...)``."""
        info = self._call_info
        if info is None:
            spec = CallSpec(qualified_name(self._python), "task", self._options)
            options = self._task_options()
            generator = inspect.isgeneratorfunction(self._python)
            info = self._call_info = (
                spec,
                options.get("num_returns"),
                generator,
                options.get("name"),
            )
        return info

    def _run_locally(
        self, config: LocalConfig, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        spec, num_returns, generator, name = self._info()
        signature = self._signature()  # where Ray checks them:
        check_call(signature, args, kwargs, self._shared.arity)
        retry = self._local_retry
        if retry is None:
            retry = self._local_retry = Retry(self._task_options())
        return local_run.run(
            spec,
            self._python,
            args,
            kwargs,
            config=config,
            num_returns=num_returns,
            generator=generator,
            retry=retry,
            task_name=name,
        )

    def _build_variant(self) -> RemoteFunction:
        function = instrument_function(self._python, self._options)
        return make_remote(
            function, _ray_compat.default_options_of(self.__wrapped__), self._options
        )

    # --- pin=True: one dedicated process ---

    def _runner(self) -> Any:
        slot = self._shared.runner
        cached = slot.runner
        if cached is not None and cached[0] is _process.process_identity():
            return cached[1]  # every call but the first: no options to merge
        pin = self._options.pin or Pin()
        return slot.handle(self._python, self._task_options(), pin, self._info()[0])

    def _call_pinned(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        runner = self._runner()
        cached = self._pinned_target
        if cached is None or cached[0] is not runner:
            # Once per proxy and runner: the method, its per-call options, the spec key.
            spec, _num_returns, generator, _name = self._info()
            method = runner.call_generator if generator else runner.call
            per_call = pinning.call_options(self._task_options(), generator)
            if per_call:
                method = method.options(**per_call)
            key = self._shared.runner.spec_key(spec)
            cached = self._pinned_target = (runner, method, key)
        return cached[1].remote(cached[2], *args, **kwargs)

    def pinned_worker(self) -> PinnedWorker:
        """Where this pinned function's process lives (starting it if needed).

        Returns:
            Node id and IP, pid, worker id and actor id: what py-spy, debugpy or an IDE
            needs to attach.

        Raises:
            InvalidOptionError: The function is not pinned with ``pin=True``.
        """
        self._require_process_pin("pinned_worker")
        return self._shared.runner.location(self._runner())

    def unpin(self) -> None:
        """End the pinned process; the next call starts a new one."""
        self._shared.runner.end()

    def stacks(self, timeout: float = 30, *, all_frames: bool = False) -> ProcessStacks:
        """The Python stack of every thread of the pinned process, even while it is busy.

        Args:
            timeout: Seconds to wait for the answer.
            all_frames: Show Ray's and raytrace_kit's frames too.

        Raises:
            InvalidOptionError: The function is not pinned with ``pin=True``.
        """
        self._require_process_pin("stacks")
        return actor_stacks(self._runner(), timeout=timeout, all_frames=all_frames)

    def _require_process_pin(self, what: str) -> None:
        if self._options.pin is None or not self._options.pin.process:
            msg = (
                f"{self.__qualname__}.{what}() needs a pinned function: decorate it with "
                f"@debuggable(pin=True), or use {self.__qualname__}.with_debug(pin=True)."
            )
            raise InvalidOptionError(msg, "pin")

    @property
    def __signature__(self) -> inspect.Signature:
        return self._signature()  # computed once, shared by every derived proxy

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        msg = (
            f"debuggable remote function {self.__qualname__!r} cannot be called directly; "
            f"use {self.__qualname__}.remote(...) and ray.get() the result."
        )
        raise UsageError(msg)
