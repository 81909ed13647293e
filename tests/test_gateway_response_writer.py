"""The compiled response encoders produce exactly kio's bytes, for every version of every API
the gateway and the group layer serve."""

from __future__ import annotations

import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_writer
from kio.static.primitive import Records

from protocol.kafka_schemas import SCHEMAS, response_schema
from protocol.response_writer import encode

st.register_type_strategy(Records, st.binary(max_size=48))

SERVED = (0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 20, 22, 37, 42, 47, 60, 68, 69)
CASES = [(k, v) for k in SERVED for v in sorted(schema_name_map[api_key_map[k]])]
CASES += sorted(SCHEMAS)  # the versions kio lacks (protocol.kafka_schemas)


@pytest.mark.parametrize(("api_key", "version"), CASES)
def test_compiled_writer_matches_kio_byte_for_byte(api_key: int, version: int) -> None:
    response_type = response_schema(api_key, version)

    @settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.from_type(response_type))
    def check(response: object) -> None:
        expected = io.BytesIO()
        entity_writer(response_type)(expected, response)
        assert encode(response) == expected.getvalue()

    check()
