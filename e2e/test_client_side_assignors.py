"""Client-side assignors over real TCP against `groupshift serve` (docs/client-side-assignors.md).

Raw frames: the ConsumerGroupHeartbeat tag carrying the client assignors, COMPUTE_ASSIGNMENT in
the response's tag, the two extension APIs (32000, 32001) with KIP-848's shapes. One server with
`group.consumer.client.assignors.enable=true`, and the session's differential groupshift (flag
off) for the differential half: flag off, ApiVersions does not list the extensions, a request
for them closes the connection as any unknown key does, and a heartbeat carrying the tag is
answered byte-for-byte as one without it. The last test sends the tagged heartbeat to a real Kafka 4.x
and to the session's differential groupshift (flag off): both ignore the tag alike."""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest

from e2e.canary import cgh, create_topics
from e2e.conftest import DifferentialServers, Gateways
from e2e.differential import Session, compare, plain, run_both
from e2e.diffgroups import new_member_id, wait_visible_to_groups
from e2e.harness import GatewayProcess
from protocol import client_assignment_wire as caw
from protocol.client import WireClient, make_request
from protocol.codec import decode_response, encode_request, response_type_of

pytestmark = pytest.mark.e2e

ON = ("group.consumer.client.assignors.enable=true",)
METADATA_TAG = caw.tagged({caw.ASSIGNMENT_METADATA_TAG: caw.assignment_metadata_field(7, b"for-m2")})


@pytest.fixture(scope="module")
def servers(
    module_gateways: Gateways, differential_servers: DifferentialServers
) -> tuple[GatewayProcess, GatewayProcess]:
    """(flag on, flag off): this module's server, and the session's differential groupshift
    (default settings but the group timings, so flag off) shared with the Kafka comparisons."""
    return module_gateways.start("on", sets=ON), differential_servers.gateway


def tagged_request(request: Any, correlation_id: int, assignors: tuple[caw.WireClientAssignor, ...]) -> bytes:
    """A ConsumerGroupHeartbeat frame with groupshift's ClientAssignors tag."""
    frame = encode_request(request, correlation_id=correlation_id, client_id="csa")[4:]
    frame = caw.with_top_level_tag(frame, caw.CLIENT_ASSIGNORS_TAG, caw.client_assignors_field(assignors))
    return struct.pack(">i", len(frame)) + frame


def extension_frame(api_key: int, correlation_id: int, body: bytes) -> bytes:
    client_id = b"csa"
    frame = struct.pack(">hhih", api_key, 0, correlation_id, len(client_id)) + client_id + b"\x00" + body
    return struct.pack(">i", len(frame)) + frame


def roundtrip(c: WireClient, data: bytes) -> bytes:
    c.send_raw(data)
    frame = c.read_frame()
    assert frame is not None, "the server closed the connection"
    return frame


def sticky(lo: int, hi: int, version: int) -> tuple[caw.WireClientAssignor, ...]:
    return (caw.WireClientAssignor("sticky", lo, hi, 0, version, b"meta"),)


def heartbeat(
    c: WireClient, corr: int, member: str, epoch: int, assignors: Any, topic: str
) -> tuple[Any, bytes]:
    req = cgh("csa", member, epoch, subscribed_topic_names=[topic], topic_partitions=[])
    if assignors is None:
        frame = roundtrip(c, encode_request(req, correlation_id=corr, client_id="csa"))
    else:
        frame = roundtrip(c, tagged_request(req, corr, assignors))
    rtype = response_type_of(req)
    # kio refuses unknown tags (Kafka's clients skip them): strip the ones this module expects
    for tail in (compute_tag(2), compute_tag(3), METADATA_TAG):
        if frame.endswith(tail):
            return decode_response(rtype, frame[: -len(tail)] + b"\x00")[1], frame
    return decode_response(rtype, frame)[1], frame


def compute_tag(epoch: int) -> bytes:
    return caw.tagged({caw.COMPUTE_ASSIGNMENT_TAG: caw.compute_assignment_field(epoch)})


def test_flag_on_the_coordinator_drives_the_assigning_member(
    servers: tuple[GatewayProcess, GatewayProcess],
) -> None:
    on, _ = servers
    with WireClient(on.port, timeout=30.0) as c:
        versions = c.request(make_request(18, 3, client_software_name="csa", client_software_version="1"))
        keys = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert keys[caw.PREPARE_ASSIGNMENT_KEY] == (0, 0) and keys[caw.INSTALL_ASSIGNMENT_KEY] == (0, 0)
        created = c.request(
            make_request(
                19,
                7,
                topics=[
                    {
                        "name": "csa-topic",
                        "num_partitions": 6,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                timeout=30000,
                validate_only=False,
            )
        )
        assert created.topics[0].error_code == 0
        topic_id = created.topics[0].topic_id

        r1, f1 = heartbeat(c, 10, "m1", 0, sticky(0, 2, 1), "csa-topic")
        assert r1.error_code == 0 and f1.endswith(compute_tag(2))
        r2, f2 = heartbeat(c, 11, "m2", 0, sticky(1, 1, 1), "csa-topic")
        assert r2.error_code == 0 and not f2[-8:].count(b"\x90\x4e")
        r1, f1 = heartbeat(c, 12, "m1", 0, None, "csa-topic")
        assert f1.endswith(compute_tag(3))

        # only the chosen member may prepare
        refused = roundtrip(
            c,
            extension_frame(
                caw.PREPARE_ASSIGNMENT_KEY,
                13,
                caw.write_prepare_request(caw.PrepareAssignmentRequest("csa", "m2", 0)),
            ),
        )
        assert caw.read_prepare_response(refused, 5).error_code == 25  # UNKNOWN_MEMBER_ID
        prepared = caw.read_prepare_response(
            roundtrip(
                c,
                extension_frame(
                    caw.PREPARE_ASSIGNMENT_KEY,
                    14,
                    caw.write_prepare_request(caw.PrepareAssignmentRequest("csa", "m1", 0)),
                ),
            ),
            5,
        )
        assert prepared.error_code == 0 and prepared.group_epoch == 3 and prepared.assignor_name == "sticky"
        assert [m.member_id for m in prepared.members] == ["m1", "m2"]
        assert prepared.members[1].metadata == b"meta" and prepared.members[1].subscribed_topic_ids == (
            topic_id,
        )
        assert [(t.topic_name, t.num_partitions) for t in prepared.topics] == [("csa-topic", 6)]

        install = caw.InstallAssignmentRequest(
            "csa",
            "m1",
            0,
            3,
            0,
            (
                caw.InstalledMember("m1", (caw.WireTopicPartitions(topic_id, (0, 1, 2)),), 1, b""),
                caw.InstalledMember("m2", (caw.WireTopicPartitions(topic_id, (3, 4, 5)),), 7, b"for-m2"),
            ),
        )
        bad = caw.InstallAssignmentRequest(
            "csa",
            "m1",
            0,
            3,
            0,
            (caw.InstalledMember("m2", (caw.WireTopicPartitions(topic_id, (3, 3)),), 1, b""),),
        )
        answer = caw.read_install_response(
            roundtrip(c, extension_frame(caw.INSTALL_ASSIGNMENT_KEY, 15, caw.write_install_request(bad))), 5
        )
        assert answer.error_code == 42 and "given to both" in (answer.error_message or "")
        answer = caw.read_install_response(
            roundtrip(c, extension_frame(caw.INSTALL_ASSIGNMENT_KEY, 16, caw.write_install_request(install))),
            5,
        )
        assert answer.error_code == 0, answer

        r2, f2 = heartbeat(c, 17, "m2", 0, None, "csa-topic")
        assert r2.member_epoch == 3
        assert [(tp.topic_id, tuple(tp.partitions)) for tp in r2.assignment.topic_partitions] == [
            (topic_id, (3, 4, 5))
        ]
        assert f2.endswith(METADATA_TAG)  # the assignor's bytes for m2, with its assignment

    # a malformed extension request closes only its own connection
    with WireClient(on.port, timeout=10.0) as bad_conn:
        bad_conn.send_raw(extension_frame(caw.INSTALL_ASSIGNMENT_KEY, 1, b"\x05csa"))
        assert bad_conn.closed_by_server()
    with WireClient(on.port, timeout=10.0) as c:
        r, _ = heartbeat(c, 1, "m2", 3, None, "csa-topic")
        assert r.error_code == 0


def test_flag_off_answers_as_without_the_extension(servers: tuple[GatewayProcess, GatewayProcess]) -> None:
    on, off = servers
    request = make_request(18, 3, client_software_name="csa", client_software_version="1")
    with WireClient(on.port) as a, WireClient(off.port) as b:
        keys_on = [(k.api_key, k.min_version, k.max_version) for k in a.request(request).api_keys]
        keys_off = [(k.api_key, k.min_version, k.max_version) for k in b.request(request).api_keys]
    assert keys_off == [k for k in keys_on if k[0] not in caw.EXTENSION_NAMES]
    assert len(keys_on) == len(keys_off) + 2

    with WireClient(off.port, timeout=10.0) as c:
        c.send_raw(
            extension_frame(
                caw.PREPARE_ASSIGNMENT_KEY,
                1,
                caw.write_prepare_request(caw.PrepareAssignmentRequest("g", "m", 0)),
            )
        )
        assert c.closed_by_server()

    run = uuid.uuid4().hex[:8]  # the flag-off server is the session's, shared
    topic = f"off-topic-{run}"
    with WireClient(off.port, timeout=30.0) as c:
        assert create_topics(c, [topic], partitions=3).topics[0].error_code == 0
    frames = []
    for group, assignors in ((f"plain-{run}", None), (f"tagged-{run}", sticky(0, 1, 1))):
        with WireClient(off.port, timeout=30.0) as c:
            req = cgh(group, "member-1", 0, subscribed_topic_names=[topic], topic_partitions=[])
            raw = encode_request(req, correlation_id=1, client_id="csa")
            if assignors is not None:
                raw = tagged_request(req, 1, assignors)
            frames.append(roundtrip(c, raw))
            req2 = cgh(group, "member-1", 2, rebalance_timeout=-1)
            raw2 = encode_request(req2, correlation_id=2, client_id="csa")
            if assignors is not None:
                raw2 = tagged_request(req2, 2, assignors)
            frames.append(roundtrip(c, raw2))
    assert frames[0] == frames[2] and frames[1] == frames[3]


def _tagged_heartbeats(s: Session) -> None:
    """Join and heartbeat with groupshift's ClientAssignors tag; Kafka skips the unknown tag."""
    s.create_topic(s.topic(), 6)
    s.wait_coordinator(s.group())
    wait_visible_to_groups(s, [s.topic()])
    versions = s.raw(18, 3, client_software_name="csa", client_software_version="1")
    s.note("extension keys", sorted(k.api_key for k in versions.api_keys if k.api_key >= 1000))
    m = new_member_id(s)
    epoch = 0
    for label in ("tagged join", "tagged heartbeat"):
        fields: dict[str, Any] = {
            "group_id": s.group(),
            "member_id": m,
            "member_epoch": epoch,
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout": 30000 if epoch == 0 else -1,
            "subscribed_topic_names": [s.topic()] if epoch == 0 else None,
            "subscribed_topic_regex": None,
            "server_assignor": None,
            "topic_partitions": [] if epoch == 0 else None,
        }
        req = make_request(68, 1, **fields)
        frame = roundtrip(s.client, tagged_request(req, 1000 + epoch, sticky(0, 1, 1)))
        _, r = decode_response(response_type_of(req), frame)
        assert r.error_code == 0 and r.member_epoch > 0, r  # accepted, the tag skipped
        p = plain(r)
        if p.get("assignment"):
            p["assignment"]["topic_partitions"] = sorted(
                (str(tp["topic_id"]), sorted(tp["partitions"])) for tp in p["assignment"]["topic_partitions"]
            )
        s.note(label, p)
        epoch = r.member_epoch


def test_kafka_and_groupshift_flag_off_ignore_the_tag_alike(differential_pair: tuple[str, str]) -> None:
    compare(run_both(_tagged_heartbeats, *differential_pair))
