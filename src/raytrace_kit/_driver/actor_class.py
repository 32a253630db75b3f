"""``DebuggableActorClass``: the proxy of an actor class (every method instrumented)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar

from raytrace_kit import _ray_compat
from raytrace_kit._driver.proxy import Debuggable, make_remote
from raytrace_kit._local import handles as local_handles
from raytrace_kit._local.setting import LocalConfig
from raytrace_kit._output.context import PARENT_KWARG
from raytrace_kit._output.writer import report_failure
from raytrace_kit._worker import state as worker_state
from raytrace_kit._worker import submitted
from raytrace_kit._worker.instrument import instrument_class
from raytrace_kit._worker.parents import install_method_hook
from raytrace_kit.exceptions import InvalidOptionError, UsageError

if TYPE_CHECKING:
    from ray.actor import ActorClass, ActorHandle

__all__ = ["DebuggableActorClass"]

_T = TypeVar("_T")


class DebuggableActorClass(Debuggable, Generic[_T]):
    """A Ray actor class whose ``__init__`` and every method call are instrumented.

    ``.remote(...)`` returns a real ``ActorHandle``; handles fetched later with
    ``ray.get_actor(name)`` are instrumented too, since the instrumentation lives in the
    class the actor process runs.
    """

    _kind = "actor class"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if _is_class_statement(args):  # class Derived(debuggable(ray.remote(Base))):
            _subclass_as_ray_does(*args)
        super().__init__(*args, **kwargs)
        pin = self._options.pin
        if pin is not None and pin.process:
            msg = (
                f"pin=True does not apply to actor class {self.__qualname__}: an actor already "
                "runs all its calls in one process. To choose its node, pin=<node id>."
            )
            raise InvalidOptionError(msg, "pin")

    def remote(self, *args: Any, **kwargs: Any) -> ActorHandle[_T]:
        """Create the actor; returns its ``ActorHandle``.

        In local mode the actor is built in this process and a ``LocalActorHandle`` is
        returned, used the same way.
        """
        return self._submit(args, kwargs)

    def _record(self, made: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Keep the creation's ``call.submit`` record: the actor's id, its creation task's."""
        try:
            prefix = self._submit_prefix
            if prefix is None:
                name = f"{self.__module__}.{self.__qualname__}.__init__"
                options = self._task_options()
                prefix = submitted.prefix(name, "actor_init", options, self._python)
                self._submit_prefix = prefix
            if not worker_state.state.parents_hooked:  # its method calls get records too
                worker_state.state.parents_hooked = True
                install_method_hook()
            submitted.record(
                prefix,
                made,
                _ray_compat.actor_id_of(made),
                kwargs.get(PARENT_KWARG),
                args,
                kwargs,
                _ray_compat.actor_creation_task_id(made),
            )
        except Exception as exc:
            report_failure("submit-record", "cannot record a submission", exc)

    def _run_locally(
        self, config: LocalConfig, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        return local_handles.create_actor(
            self._python, self._options, self._task_options(), args, kwargs, config=config
        )

    def _build_variant(self) -> ActorClass[_T]:
        # The user's own Ray options, unchanged: adding anything (a concurrency group, say)
        # would change how Ray runs the actor's methods.
        cls = instrument_class(self._python, self._options)
        return make_remote(cls, _ray_compat.default_options_of(self.__wrapped__), self._options)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        msg = (
            f"debuggable actor class {self.__qualname__!r} cannot be instantiated "
            f"directly; use {self.__qualname__}.remote(...) to create the actor."
        )
        raise UsageError(msg)


def _is_class_statement(args: tuple[Any, ...]) -> bool:
    """Whether Python is building a class on a proxy: ``type(base)(name, bases, namespace)``."""
    return (
        len(args) == 3
        and isinstance(args[0], str)
        and isinstance(args[1], tuple)
        and isinstance(args[2], dict)
    )


def _subclass_as_ray_does(name: str, bases: tuple[Any, ...], namespace: dict[str, Any]) -> None:
    """Subclass the actor classes behind the proxies, as plain Ray would: Ray refuses.

    Raises:
        ActorClassInheritanceException: Ray's own (a ``TypeError``), with its message.
    """
    unwrapped = tuple(
        base.__wrapped__ if isinstance(base, DebuggableActorClass) else base for base in bases
    )
    proxies = [base for base in bases if isinstance(base, DebuggableActorClass)]
    type(proxies[0].__wrapped__)(name, unwrapped, namespace)
    msg = f"cannot define class {name!r} on a debuggable actor class"  # Ray did not refuse
    raise TypeError(msg)
