"""`sasl.jaas.config` values, read as Kafka's `JaasConfig` reads them.

Kafka takes a broker's SASL users from a JAAS login-module entry, given inline per listener and
mechanism: `listener.name.<l>.<mechanism>.sasl.jaas.config=<LoginModuleClass> <flag>
key="value" ...;`. The grammar (Java's `javax.security.auth.login.ConfigFile`, tokenized by
`StreamTokenizer` in Kafka's `JaasConfig`) is: a login module class name, a control flag
(`required`, `requisite`, `sufficient`, `optional`), options `name=value` where the value is a
double-quoted string (backslash escapes) or a bare word, and a closing `;`. An inline
`sasl.jaas.config` must hold exactly one login module ("must contain one login module").
`PlainLoginModule`'s `user_<name>="<password>"` options are the PLAIN users.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

CONTROL_FLAGS = frozenset({"required", "requisite", "sufficient", "optional"})
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
USER_PREFIX = "user_"
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}
_SEPARATORS = "=;"


class JaasError(ValueError):
    """The value is not one JAAS login-module entry; the message says what is wrong (never the
    value, which holds passwords)."""


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    control_flag: str
    options: Mapping[str, str]

    def users(self) -> dict[str, str]:
        """PlainLoginModule's users: `user_<name>` option -> password."""
        return {k[len(USER_PREFIX) :]: v for k, v in self.options.items() if k.startswith(USER_PREFIX)}


def _tokens(text: str) -> list[tuple[str, bool]]:
    """(token, quoted) pairs; `=` and `;` are tokens of their own; `//` and `/* */` comments
    are skipped as StreamTokenizer skips them."""
    out: list[tuple[str, bool]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise JaasError("unterminated comment")
            i = end + 2
        elif c in _SEPARATORS:
            out.append((c, False))
            i += 1
        elif c == '"':
            chars: list[str] = []
            i += 1
            while True:
                if i >= n:
                    raise JaasError("unterminated quoted value")
                c = text[i]
                if c == '"':
                    i += 1
                    break
                if c == "\\" and i + 1 < n:
                    chars.append(_ESCAPES.get(text[i + 1], text[i + 1]))
                    i += 2
                    continue
                chars.append(c)
                i += 1
            out.append(("".join(chars), True))
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] not in _SEPARATORS and text[i] != '"':
                i += 1
            out.append((text[start:i], False))
    return out


def parse_jaas(text: str) -> JaasEntry:
    """The one login-module entry of an inline `sasl.jaas.config` value."""
    tokens = _tokens(text)
    entries: list[JaasEntry] = []
    pos = 0
    while pos < len(tokens):
        if pos + 1 >= len(tokens):
            raise JaasError("expected a login module class and a control flag")
        (module, quoted), (flag, _) = tokens[pos], tokens[pos + 1]
        if quoted or module in _SEPARATORS:
            raise JaasError("expected a login module class name")
        if flag.lower() not in CONTROL_FLAGS:
            raise JaasError(f"login module control flag must be one of {', '.join(sorted(CONTROL_FLAGS))}")
        pos += 2
        options: dict[str, str] = {}
        while True:
            if pos >= len(tokens):
                raise JaasError("expected ';' at the end of the login module entry")
            name, quoted = tokens[pos]
            if name == ";" and not quoted:
                pos += 1
                break
            if quoted or name in _SEPARATORS or pos + 2 >= len(tokens) or tokens[pos + 1] != ("=", False):
                raise JaasError("expected options of the form name=value")
            value, value_quoted = tokens[pos + 2]
            if not value_quoted and value in _SEPARATORS:
                raise JaasError(f"option {name} has no value")
            options[name] = value
            pos += 3
        entries.append(JaasEntry(module, flag.lower(), options))
    if len(entries) != 1:
        raise JaasError(f"JAAS config property contains {len(entries)} login modules, should be 1 module")
    return entries[0]
