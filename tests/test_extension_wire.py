"""protocol.extension_wire, the reader and writer both extension API families share: the shapes
they have in common are one encoding (an assignor entry written by either module reads back in
the other), the client's request frame is what the server's codec decodes, and the bounded
reader refuses what runs past the frame."""

from __future__ import annotations

import pytest

from protocol import client_assignment_wire as caw
from protocol import connect_wire as cw
from protocol import extension_wire as ew
from protocol.codec import api_schema, decode

ASSIGNOR = ew.WireAssignor("sticky", -1, 3, 2, 2, b"\x00meta")


def test_the_assignor_entry_is_one_encoding_for_both_families() -> None:
    field = caw.client_assignors_field((ASSIGNOR,))
    # the heartbeat field is the count, then the entries as the Connect heartbeat writes them
    assert field == ew.count(1) + cw.write_assignor(ASSIGNOR)
    assert cw.read_assignor(ew.BoundedReader(field, 1)) == ASSIGNOR


def test_a_client_request_frame_decodes_through_the_server_codec() -> None:
    prepare = caw.PrepareAssignmentRequest("g", "m", 4)
    body = caw.write_prepare_request(prepare)
    whole = ew.request_frame(caw.PREPARE_ASSIGNMENT_KEY, 0, 41, "client-1", body)
    assert ew.INT32.unpack_from(whole)[0] == len(whole) - 4
    schema = api_schema(caw.PREPARE_ASSIGNMENT_KEY, 0)
    assert schema is not None
    header, body = decode(schema, whole[4:])
    assert (header.correlation_id, header.client_id, body) == (41, "client-1", prepare)
    assert caw.read_prepare_request(whole[4:], ew.body_offset(whole[4:])) == prepare


def test_the_install_response_reads_the_same_in_both_families() -> None:
    body = ew.write_install_response(3, 42, "Invalid assignment")
    assert caw.read_install_response(body) == caw.InstallAssignmentResponse(42, "Invalid assignment", 3)
    assert cw.read_install_response(body) == cw.ConnectInstallResponse(42, "Invalid assignment", 3)


def test_reading_past_the_field_is_malformed() -> None:
    r = ew.BoundedReader(ew.INT64.pack(7) + b"\x05ab", 0, 10)
    assert r.int64() == 7
    with pytest.raises(ew.MalformedExtension):
        r.string()  # claims 4 bytes, 2 are left in the field
    with pytest.raises(ew.MalformedExtension):
        ew.BoundedReader(b"\x01\x02", 0).end_of_body()  # no tags, then a byte too many
