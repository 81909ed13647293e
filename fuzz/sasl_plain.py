"""Target `sasl_plain`: a SASL/PLAIN client message (RFC 4616) as SaslAuthenticate carries it
to `gateway.sasl.plain.PlainServer` (the listener's JAAS users: `user` / `pencil`).

Clean: `SaslAuthenticationFailed` (SASL_AUTHENTICATION_FAILED with Kafka's message, and the
close). Asserted: an accepted message is exactly
`[authzid] NUL user NUL pencil` with an empty authzid or `user`, and the principal is `User:user`.
"""

from __future__ import annotations

from fuzz.common import Target
from gateway.sasl.mechanism import SaslAuthenticationFailed
from gateway.sasl.plain import PlainServer

USERS = {"user": "pencil", "é": "ünïcode"}


def one_input(data: bytes) -> None:
    step = PlainServer(USERS).step(data)
    assert step.complete and step.challenge == b""
    authzid, user, password = data.decode("utf-8", errors="replace").split("\x00")
    assert USERS[user] == password and authzid in ("", user), data
    assert step.principal == f"User:{user}"


def seeds() -> list[bytes]:
    return [
        b"\x00user\x00pencil",
        b"user\x00user\x00pencil",
        "\x00é\x00ünïcode".encode(),
    ]


TARGET = Target(
    name="sasl_plain",
    doc=__doc__ or "",
    seeds=seeds,
    one_input=one_input,
    clean=(SaslAuthenticationFailed,),
    instrument=("gateway.sasl.plain",),
)
