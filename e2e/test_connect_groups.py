"""Connect groups on the new protocol over real TCP against `groupshift serve`
(docs/connect-groups.md): raw frames of ConnectGroupHeartbeat (32002) and
ConnectGroupPrepareAssignment / InstallAssignment (32003, 32004).

One server with `group.connect.enable=true` and a 2 s `scheduled.rebalance.max.delay.ms`: two
workers join, the one the coordinator picks computes and installs, both reconcile, one leaves,
its tasks are held for the delay and move to the other worker after it; ListGroups and
DescribeGroups show the group as type `connect`. The differential half uses the session's Kafka
and groupshift (flag off): neither advertises the extension keys, and both close the connection
on a ConnectGroupHeartbeat frame, as on any unknown key."""

from __future__ import annotations

import struct
import time
from typing import Any

import pytest

from e2e.conftest import DifferentialServers, Gateways
from e2e.harness import GatewayProcess
from protocol import connect_wire as cw
from protocol.client import WireClient, make_request
from protocol.client_assignment_wire import response_body_offset

pytestmark = pytest.mark.e2e

DELAY_MS = 2000
ON = ("group.connect.enable=true", f"group.connect.scheduled.rebalance.max.delay.ms={DELAY_MS}")
KEYS = (cw.CONNECT_HEARTBEAT_KEY, cw.CONNECT_PREPARE_KEY, cw.CONNECT_INSTALL_KEY)
GROUP = "connect-e2e"


@pytest.fixture(scope="module")
def server(module_gateways: Gateways) -> GatewayProcess:
    return module_gateways.start("connect", sets=ON)


def frame(api_key: int, correlation_id: int, body: bytes) -> bytes:
    client_id = b"worker"
    f = struct.pack(">hhih", api_key, 0, correlation_id, len(client_id)) + client_id + b"\x00" + body
    return struct.pack(">i", len(f)) + f


def work(*items: str) -> cw.WireWork:
    connectors = tuple(sorted(i for i in items if "/" not in i))
    tasks = tuple(sorted(cw.WireTask(i.split("/")[0], int(i.split("/")[1])) for i in items if "/" in i))
    return cw.WireWork(connectors, tasks)


def names(w: cw.WireWork) -> set[str]:
    return set(w.connectors) | {f"{t.connector}/{t.task}" for t in w.tasks}


class Worker:
    """A minimal worker: its member id, epoch and what it runs (the SDK is not built)."""

    def __init__(self, c: WireClient, member_id: str) -> None:
        self.c, self.member_id, self.epoch, self.owned = c, member_id, 0, work()
        self.corr = 100

    def _call(self, key: int, body: bytes) -> bytes:
        self.corr += 1
        self.c.send_raw(frame(key, self.corr, body))
        f = self.c.read_frame()
        assert f is not None, "the server closed the connection"
        assert struct.unpack_from(">i", f)[0] == self.corr
        return f

    def hb(self, epoch: int | None = None) -> cw.ConnectHeartbeatResponse:
        e = self.epoch if epoch is None else epoch
        join: dict[str, Any] = {}
        if e == 0:
            assignor = cw.WireConnectAssignor("incremental", 0, 1, 0, 1, b"")
            join = {
                "rebalance_timeout_ms": 10000,
                "url": f"http://{self.member_id}:8083",
                "assignors": (assignor,),
            }
        req = cw.ConnectHeartbeatRequest(GROUP, self.member_id, e, owned=self.owned, **join)
        f = self._call(cw.CONNECT_HEARTBEAT_KEY, cw.write_heartbeat_request(req))
        r = cw.read_heartbeat_response(f, response_body_offset(f))
        assert r.error_code == 0, r
        if e >= 0:
            self.epoch = r.member_epoch
            if r.assignment is not None:
                self.owned = r.assignment.work
        return r

    def prepare(self) -> cw.ConnectPrepareResponse:
        body = cw.write_prepare_request(cw.ConnectPrepareRequest(GROUP, self.member_id, self.epoch))
        f = self._call(cw.CONNECT_PREPARE_KEY, body)
        return cw.read_prepare_response(f, response_body_offset(f))

    def install(self, group_epoch: int, targets: dict[str, cw.WireWork]) -> cw.ConnectInstallResponse:
        members = tuple(cw.InstalledWorker(m, w) for m, w in targets.items())
        req = cw.ConnectInstallRequest(GROUP, self.member_id, self.epoch, group_epoch, 0, members)
        f = self._call(cw.CONNECT_INSTALL_KEY, cw.write_install_request(req))
        return cw.read_install_response(f, response_body_offset(f))


def test_two_workers_assign_reconcile_and_a_departed_workers_tasks_move_after_the_delay(
    server: GatewayProcess,
) -> None:
    with WireClient(server.port, timeout=30.0) as ca, WireClient(server.port, timeout=30.0) as cb:
        versions = ca.request(make_request(18, 3, client_software_name="w", client_software_version="1"))
        keys = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert all(keys.get(k) == (0, 0) for k in KEYS), keys
        a, b = Worker(ca, "worker-a"), Worker(cb, "worker-b")
        assert a.hb().compute_assignment == 1
        assert b.hb().compute_assignment == cw.NO_COMPUTE
        assert a.hb().compute_assignment == 2
        p = a.prepare()
        assert (
            p.error_code == 0
            and p.group_epoch == 2
            and [m.member_id for m in p.members]
            == [
                "worker-a",
                "worker-b",
            ]
        )
        everything = ("c1", "c1/0", "c1/1", "c1/2")
        r = a.install(2, {"worker-a": work("c1", "c1/0"), "worker-b": work("c1/1", "c1/2")})
        assert r.error_code == 0, r
        a.hb()
        b.hb()
        assert (a.epoch, b.epoch) == (2, 2)
        assert names(a.owned) == {"c1", "c1/0"} and names(b.owned) == {"c1/1", "c1/2"}

        b.hb(epoch=-1)  # worker-b leaves: its tasks are held for the delay
        left_at = time.monotonic()
        assert a.hb().compute_assignment == 3
        p = a.prepare()
        assert [(d.member_id, names(d.work)) for d in p.delayed] == [("worker-b", {"c1/1", "c1/2"})]
        early = a.install(3, {"worker-a": work(*everything)})
        assert early.error_code == 42 and "held for departed worker" in (early.error_message or "")
        assert a.install(3, {"worker-a": work("c1", "c1/0")}).error_code == 0
        a.hb()
        assert names(a.owned) == {"c1", "c1/0"}

        deadline = time.monotonic() + 10
        while (r := a.hb()).compute_assignment == cw.NO_COMPUTE:
            assert time.monotonic() < deadline, "the delay never expired"
            time.sleep(0.2)
        assert time.monotonic() - left_at >= DELAY_MS / 1000 - 0.1, "released before the delay"
        p = a.prepare()
        assert p.delayed == () and p.group_epoch == r.compute_assignment == 4
        assert a.install(4, {"worker-a": work(*everything)}).error_code == 0
        a.hb()
        assert names(a.owned) == set(everything) and a.epoch == 4

        listed = ca.request(make_request(16, 5, states_filter=[], types_filter=["connect"]))
        assert [(g.group_id, g.group_type, g.protocol_type, g.group_state) for g in listed.groups] == [
            (GROUP, "connect", "connect", "Stable")
        ]
        described = ca.request(make_request(15, 5, groups=[GROUP], include_authorized_operations=False))
        (g,) = described.groups
        assert (g.group_state, g.protocol_type, g.protocol_data) == ("Stable", "connect", "incremental")
        assert [m.member_id for m in g.members] == ["worker-a"]


def test_flag_off_the_extension_is_absent_as_on_kafka(differential_servers: DifferentialServers) -> None:
    host, port = differential_servers.kafka_bootstrap.rsplit(":", 1)
    for h, p in ((host, int(port)), ("127.0.0.1", differential_servers.gateway.port)):
        with WireClient(p, host=h, timeout=30.0) as c:
            versions = c.request(make_request(18, 3, client_software_name="w", client_software_version="1"))
            assert not {k.api_key for k in versions.api_keys} & set(KEYS)
            req = cw.ConnectHeartbeatRequest(GROUP, "m", 0, 1000, "http://m", 0, (), work())
            c.send_raw(frame(cw.CONNECT_HEARTBEAT_KEY, 1, cw.write_heartbeat_request(req)))
            assert c.read_frame() is None, f"{h}:{p} answered an unknown key"
