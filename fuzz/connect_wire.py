"""Target `connect_wire`: the request bodies of the Connect-group extension APIs.

ConnectGroupHeartbeat (32002), ConnectGroupPrepareAssignment (32003) and
ConnectGroupInstallAssignment (32004) are groupshift's (the Connect draft summarised in
docs/connect-groups.md; Kafka never built them); a client reaches their decoders
(`protocol.connect_wire` over the shared reader of `protocol.extension_wire`) with any bytes once
`group.connect.enable` is on. An input is `[API selector byte][body]`: the selector modulo 3
picks the API, the body is read from offset 0 as the gateway reads it after the request header.

Clean: `MalformedExtension`, the one refusal type of the extension readers, which
`protocol.codec` turns into a DecodeFailure (the connection is closed, as Kafka closes it on a
request it cannot parse). Any other exception is a finding. A body that decodes must write back
to bytes that decode to the same request (the worker SDK writes with these writers).

Seeds: each API's requests as the SDK and the tests send them (join, steady heartbeat, leave,
null and present owned work, several assignors; prepare; install with and without an error).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fuzz.common import Target
from protocol import connect_wire as cw
from protocol.extension_wire import MalformedExtension

_READERS: tuple[tuple[Callable[[bytes, int], Any], Callable[[Any], bytes]], ...] = (
    (cw.read_heartbeat_request, cw.write_heartbeat_request),
    (cw.read_prepare_request, cw.write_prepare_request),
    (cw.read_install_request, cw.write_install_request),
)


def _work(*items: str) -> cw.WireWork:
    connectors = tuple(i for i in items if "/" not in i)
    tasks = tuple(cw.WireTask(i.split("/")[0], int(i.split("/")[1])) for i in items if "/" in i)
    return cw.WireWork(connectors, tasks)


def seeds() -> list[bytes]:
    inc = cw.WireConnectAssignor("incremental", 0, 2, 1, 2, b"\x00\x01meta")
    other = cw.WireConnectAssignor("eager", 1, 1, -1, 1, b"")
    heartbeats = (
        cw.ConnectHeartbeatRequest("cc", "", 0, 30_000, "http://w1:8083", 12, (inc, other), _work()),
        cw.ConnectHeartbeatRequest("connect-cluster", "m-1", 3, owned=_work("s1", "s1/0", "s2/5")),
        cw.ConnectHeartbeatRequest("connect-cluster", "m-1", 3, 45_000, None, 99, None, None),
        cw.ConnectHeartbeatRequest("connect-cluster", "m-1", -1),
    )
    installs = (
        cw.ConnectInstallRequest(
            "connect-cluster",
            "m-1",
            3,
            4,
            0,
            (
                cw.InstalledWorker("m-1", _work("s1", "s1/0"), 1, b"for-m-1"),
                cw.InstalledWorker("m-2", _work("s1/1", "s2"), 1, b""),
            ),
        ),
        cw.ConnectInstallRequest("connect-cluster", "m-1", 3, 4, 1, ()),
    )
    out = [bytes([0]) + cw.write_heartbeat_request(h) for h in heartbeats]
    out.append(bytes([1]) + cw.write_prepare_request(cw.ConnectPrepareRequest("connect-cluster", "m-1", 3)))
    out.extend(bytes([2]) + cw.write_install_request(i) for i in installs)
    return out


def one_input(data: bytes) -> None:
    if not data:
        data = b"\x00"
    read, write = _READERS[data[0] % 3]
    request = read(data, 1)
    again = read(write(request), 0)
    assert again == request, (request, again)


TARGET = Target(
    name="connect_wire",
    doc=__doc__ or "",
    seeds=seeds,
    one_input=one_input,
    clean=(MalformedExtension,),
    instrument=("protocol.connect_wire", "protocol.extension_wire"),
)
