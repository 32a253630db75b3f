"""``log_args=True``: what arguments (and a failed call's locals) look like, secrets left out.

Each argument is a ``repr`` with bounded work (``reprlib``'s limits) and capped length;
values under secret-looking names (parameters, dict keys, dataclass fields) and passwords
in URLs are written as ``<redacted>``. A failed call's locals (:func:`shown_value`) also
leave out the process's environment: ``os.environ`` and copies of it, and every value of
it long enough to be a secret, wherever it appears.
"""

from __future__ import annotations

import dataclasses
import os
import re
import reprlib
from collections.abc import Mapping
from typing import Any

__all__ = [
    "ARGS_CHARS",
    "ARG_CHARS",
    "ENVIRONMENT",
    "ENV_VALUE_CHARS",
    "REDACTED",
    "SECRET_WORDS",
    "environment_values",
    "is_secret_key",
    "shown_arguments",
    "shown_argv",
    "shown_value",
]

ARG_CHARS = 200  # each argument's repr, at most (log_args=True); documented in docs/events.md
ARGS_CHARS = 2000  # all of a call's arguments together, at most
REDACTED = "<redacted>"
# Words that make a name secret-looking: whole words of it (api_key, apiKey, db_pwd), so
# "author", "passenger" or "bypass" are not.
SECRET_WORDS = frozenset(
    {
        "password", "passwd", "pwd", "pass", "passphrase", "secret", "secrets", "token",
        "tokens", "apikey", "auth", "authorization", "credential", "credentials", "creds",
        "key", "keys", "jwt", "cookie", "cookies", "signature", "private", "session", "otp",
        "dsn", "cert", "ssn",
    }
)  # fmt: skip
ENVIRONMENT = "<the environment: not shown>"  # os.environ, or a dict copied from it
# Values of the environment this long or longer are never shown, wherever they appear;
# shorter ones ("1", "true", "C.UTF-8") are settings rather than secrets, and everywhere.
ENV_VALUE_CHARS = 8
# Variables whose values are places and names, in many values that are no secret (a path
# under the home directory): redacting them would hide the data, not a secret.
_PLAIN_VARIABLES = frozenset(
    {
        "HOME", "PWD", "OLDPWD", "USER", "LOGNAME", "SHELL", "PATH", "LANG", "TERM",
        "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV",
    }
)  # fmt: skip
# Compiled at first use, by re's own cache (re.findall, re.sub): each Ray worker imports
# this module at its first call, and most never show an argument (0.4 ms to compile both).
_WORDS = r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+"
_URL_USERINFO = r"(?P<scheme>[a-zA-Z][\w+.-]*://[^:/@\s]+:)[^@\s]+@"


def is_secret_key(key: object) -> bool:
    """Whether a parameter name or dict key looks like it names a secret."""
    if isinstance(key, bytes):
        key = key.decode("utf-8", "replace")
    if not isinstance(key, str):
        return False
    return any(word.lower() in SECRET_WORDS for word in re.findall(_WORDS, key))


class _Redacting(reprlib.Repr):
    """``repr`` with bounded work (reprlib's limits) and secrets left out.

    Values under secret-looking keys (dicts, dataclass fields, object attributes in their
    ``repr``) are redacted at any depth reprlib shows; passwords in URLs too.
    """

    def __init__(self, hidden: tuple[str, ...] | None = None) -> None:
        super().__init__()
        self.maxlevel, self.maxdict, self.maxlist, self.maxtuple = 4, 20, 20, 20
        self.maxstring, self.maxother, self.maxlong = ARG_CHARS, ARG_CHARS, 60
        # None: the environment is not looked for (arguments); else its values never shown.
        self.environment = hidden is not None
        self.hidden = hidden or ()

    def repr_dict(self, x: dict[Any, Any], level: int) -> str:
        if not x:
            return "{}"
        if level <= 0:
            return "{...}"
        if self.environment and _copied_environment(x):
            return ENVIRONMENT
        parts = []
        for key in list(x)[: self.maxdict]:
            shown = REDACTED if is_secret_key(key) else self.repr1(x[key], level - 1)
            parts.append(f"{self.repr1(key, level - 1)}: {shown}")
        more = ", ..." if len(x) > self.maxdict else ""
        return "{" + ", ".join(parts) + more + "}"

    def repr_str(self, x: str, level: int) -> str:
        if self.hidden and _holds(x, self.hidden):
            return REDACTED
        return super().repr_str(re.sub(_URL_USERINFO, rf"\g<scheme>{REDACTED}@", x), level)

    def repr__Environ(self, x: object, level: int) -> str:  # noqa: N802 -- reprlib's name for os._Environ
        return ENVIRONMENT if self.environment else self.repr_instance(x, level)

    def repr_instance(self, x: object, level: int) -> str:
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            fields = []
            for field in dataclasses.fields(x)[: self.maxdict]:
                value = getattr(x, field.name, None)
                shown = REDACTED if is_secret_key(field.name) else self.repr1(value, level - 1)
                fields.append(f"{field.name}={shown}")
            return f"{type(x).__name__}({', '.join(fields)})"
        try:
            text = repr(x)
        except Exception as exc:
            return f"<{type(x).__name__} whose __repr__ raised {type(exc).__name__}>"
        text = re.sub(_URL_USERINFO, rf"\g<scheme>{REDACTED}@", _scrubbed(text, self.hidden))
        if len(text) > self.maxother:
            text = f"{text[: self.maxother - 24]}... <{len(text) - self.maxother + 24} more>"
        return text


_REPR = _Redacting()
# Of a long string, the parts where reprlib's cut can show a hidden value, whole or in part.
_WINDOW = 4096


def environment_values(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The values of the environment that :func:`shown_value` never shows, longest first.

    Those of :data:`ENV_VALUE_CHARS` characters or more, of every variable except the few
    that name places (``HOME``, ``PWD``, ``PATH``...). ``environ`` is ``os.environ`` unless
    given.
    """
    environ = os.environ if environ is None else environ
    found = {
        value
        for name, value in environ.items()
        if len(value) >= ENV_VALUE_CHARS and name not in _PLAIN_VARIABLES
    }
    return tuple(sorted(found, key=len, reverse=True))


def _holds(text: str, hidden: tuple[str, ...]) -> bool:
    """Whether ``text`` holds a hidden value where a repr of it would show (its ends)."""
    if len(text) > 2 * _WINDOW:
        text = f"{text[:_WINDOW]}\0{text[-_WINDOW:]}"
    return any(value in text for value in hidden)


def _scrubbed(text: str, hidden: tuple[str, ...]) -> str:
    for value in hidden:
        if value in text:
            text = text.replace(value, REDACTED)
    return text


def _copied_environment(mapping: dict[Any, Any]) -> bool:
    """Whether a dict is the environment, or a copy of it: half its entries are in it, or more.

    Only ``str`` values are compared (no ``__eq__`` of the user's runs); at most 256 entries
    are looked at.
    """
    environ = os.environ
    looked = matched = 0
    for key, value in list(dict.items(mapping))[:256]:
        looked += 1
        if type(key) is str and type(value) is str and environ.get(key) == value:
            matched += 1
    return looked >= 2 and 2 * matched >= looked


def shown_value(value: object, hidden: tuple[str, ...] = ()) -> str:
    """One value as ``log_args`` shows it: a short ``repr``, secrets under keys redacted.

    ``hidden`` (:func:`environment_values`) are never shown: a string holding one is
    ``<redacted>``, and so is each place one appears in a repr; ``os.environ`` and dicts
    copied from it are :data:`ENVIRONMENT`. Never raises.
    """
    if value is os.environ:
        return ENVIRONMENT
    return _scrubbed(_short_repr(value, _Redacting(hidden)), hidden)


def shown_argv(argv: list[str]) -> list[str]:
    """A program's arguments as ``log_args`` shows them: secret-looking options' values out.

    ``--token=abc`` becomes ``--token=<redacted>``, and the word after ``--api-key``;
    passwords in URLs too; each argument cut at :data:`ARG_CHARS`.
    """
    shown: list[str] = []
    hide_next = False
    for argument in argv:
        name, equals, _value = argument.partition("=")
        if hide_next and not argument.startswith("-"):
            shown.append(REDACTED)
        elif argument.startswith("-") and equals and is_secret_key(name.lstrip("-")):
            shown.append(f"{name}={REDACTED}")
        else:
            shown.append(re.sub(_URL_USERINFO, rf"\g<scheme>{REDACTED}@", argument)[:ARG_CHARS])
        hide_next = argument.startswith("-") and not equals and is_secret_key(argument.lstrip("-"))
    return shown


def _short_repr(value: object, shower: _Redacting = _REPR) -> str:
    try:
        text = shower.repr(value)
    except Exception as exc:
        return f"<{type(value).__name__} whose __repr__ raised {type(exc).__name__}>"
    if len(text) > ARG_CHARS:
        text = f"{text[: ARG_CHARS - 24]}... <{len(text) - ARG_CHARS + 24} more>"
    return text


def shown_arguments(
    args: tuple[Any, ...], kwargs: Mapping[str, Any], names: tuple[str, ...] = ()
) -> dict[str, Any]:
    """``{"args": [...], "kwargs": {...}}`` as ``log_args=True`` shows them.

    ``names`` are the positional parameters' names: a secret-looking one (``password``)
    is redacted when passed by position too. Never raises.
    """
    try:
        shown_args = [
            REDACTED if i < len(names) and is_secret_key(names[i]) else _short_repr(value)
            for i, value in enumerate(args)
        ]
        shown_kwargs = {
            key: REDACTED if is_secret_key(key) else _short_repr(value)
            for key, value in kwargs.items()
        }
    except Exception as exc:
        return {"args": [f"<not shown: {type(exc).__name__}>"], "kwargs": {}}
    shown = {"args": shown_args, "kwargs": shown_kwargs}
    if sum(map(len, shown_args)) + sum(map(len, shown_kwargs.values())) > ARGS_CHARS:
        return {"args": [f"<{len(args)} arguments: too long to show>"], "kwargs": {}}
    return shown
