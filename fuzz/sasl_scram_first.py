"""Target `sasl_scram_first`: a SCRAM client-first message (RFC 5802 `n,[a=authzid],n=name,
r=nonce[,ext=value]`) to `gateway.sasl.scram.ScramServer` (SCRAM-SHA-256; user `user` exists).

Clean: `SaslAuthenticationFailed` (Kafka's answer and the close; `SaslInvalidCredentials` for a
malformed message or an unknown user). Asserted: an accepted message names `user` (escapes
undone), and the server-first answer is `r=<client nonce><server nonce>,s=<salt>,i=4096`.
"""

from __future__ import annotations

import base64

from fuzz.common import Target
from gateway.sasl.mechanism import SaslAuthenticationFailed
from gateway.sasl.scram import ScramCredential, ScramServer, credential_from_password, parse_client_first

SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CREDENTIAL = credential_from_password("SCRAM-SHA-256", "pencil", SALT, 4096)
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"


def lookup(mechanism: str, user: str) -> ScramCredential | None:
    return CREDENTIAL if user == "user" else None


def server() -> ScramServer:
    return ScramServer("SCRAM-SHA-256", lookup, nonce=lambda: SERVER_NONCE)


def one_input(data: bytes) -> None:
    step = server().step(data)
    first = parse_client_first(data)
    assert first.username == "user" and not step.complete
    assert step.challenge == f"r={first.nonce}{SERVER_NONCE},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".encode()


def seeds() -> list[bytes]:
    return [
        b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
        b"n,a=user,n=user,r=abc",
        b"n,,m=x,n=user,r=abc,tokenauth=false,ext=1",
    ]


TARGET = Target(
    name="sasl_scram_first",
    doc=__doc__ or "",
    seeds=seeds,
    one_input=one_input,
    clean=(SaslAuthenticationFailed,),
    instrument=("gateway.sasl.scram",),
)
