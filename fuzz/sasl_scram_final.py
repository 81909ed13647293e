"""Target `sasl_scram_final`: a SCRAM client-final message (RFC 5802 `c=binding,r=nonce
[,ext=value],p=proof`) to `gateway.sasl.scram.ScramServer` after RFC 7677's client-first
(SCRAM-SHA-256, user `user`, password `pencil`).

Clean: `SaslAuthenticationFailed` (`SaslInvalidCredentials`: malformed, wrong nonce, wrong
proof). Asserted: an accepted message carries RFC 7677's nonce and a proof that verifies, the
answer is RFC 7677's server-final message and the principal is `User:user`.
"""

from __future__ import annotations

from fuzz.common import Target
from fuzz.sasl_scram_first import server
from gateway.sasl.mechanism import SaslAuthenticationFailed
from gateway.sasl.scram import parse_client_final

CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
NONCE = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
PROOF = "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def one_input(data: bytes) -> None:
    scram = server()
    scram.step(CLIENT_FIRST)
    step = scram.step(data)
    final = parse_client_final(data)
    assert final.nonce == NONCE and step.complete and step.principal == "User:user"
    assert step.challenge == SERVER_FINAL


def seeds() -> list[bytes]:
    return [
        f"c=biws,r={NONCE},p={PROOF}".encode(),
        f"c=biws,r={NONCE},ext=1,p={PROOF}".encode(),
    ]


TARGET = Target(
    name="sasl_scram_final",
    doc=__doc__ or "",
    seeds=seeds,
    one_input=one_input,
    clean=(SaslAuthenticationFailed,),
    instrument=("gateway.sasl.scram",),
)
