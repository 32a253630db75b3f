"""``log_args=True``: what a call's arguments look like in ``call.start``, secrets left out.

Each argument is a ``repr`` with bounded work (``reprlib``'s limits) and capped length;
values under secret-looking names (parameters, dict keys, dataclass fields) and passwords
in URLs are written as ``<redacted>``.
"""

from __future__ import annotations

import dataclasses
import re
import reprlib
from collections.abc import Mapping
from typing import Any

__all__ = [
    "ARGS_CHARS",
    "ARG_CHARS",
    "REDACTED",
    "SECRET_WORDS",
    "is_secret_key",
    "shown_arguments",
    "shown_argv",
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
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_URL_PASSWORD = re.compile(r"(?P<scheme>[a-zA-Z][\w+.-]*://[^:/@\s]+:)[^@\s]+@")


def is_secret_key(key: object) -> bool:
    """Whether a parameter name or dict key looks like it names a secret."""
    if isinstance(key, bytes):
        key = key.decode("utf-8", "replace")
    if not isinstance(key, str):
        return False
    return any(word.lower() in SECRET_WORDS for word in _WORDS.findall(key))


class _Redacting(reprlib.Repr):
    """``repr`` with bounded work (reprlib's limits) and secrets left out.

    Values under secret-looking keys (dicts, dataclass fields, object attributes in their
    ``repr``) are redacted at any depth reprlib shows; passwords in URLs too.
    """

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxdict, self.maxlist, self.maxtuple = 4, 20, 20, 20
        self.maxstring, self.maxother, self.maxlong = ARG_CHARS, ARG_CHARS, 60

    def repr_dict(self, x: dict[Any, Any], level: int) -> str:
        if not x:
            return "{}"
        if level <= 0:
            return "{...}"
        parts = []
        for key in list(x)[: self.maxdict]:
            shown = REDACTED if is_secret_key(key) else self.repr1(x[key], level - 1)
            parts.append(f"{self.repr1(key, level - 1)}: {shown}")
        more = ", ..." if len(x) > self.maxdict else ""
        return "{" + ", ".join(parts) + more + "}"

    def repr_str(self, x: str, level: int) -> str:
        return super().repr_str(_URL_PASSWORD.sub(rf"\g<scheme>{REDACTED}@", x), level)

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
        text = _URL_PASSWORD.sub(rf"\g<scheme>{REDACTED}@", text)
        if len(text) > self.maxother:
            text = f"{text[: self.maxother - 24]}... <{len(text) - self.maxother + 24} more>"
        return text


_REPR = _Redacting()


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
            shown.append(_URL_PASSWORD.sub(rf"\g<scheme>{REDACTED}@", argument)[:ARG_CHARS])
        hide_next = argument.startswith("-") and not equals and is_secret_key(argument.lstrip("-"))
    return shown


def _short_repr(value: object) -> str:
    try:
        text = _REPR.repr(value)
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
