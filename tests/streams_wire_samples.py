"""Bodies of the streams-group APIs kio lacks (protocol/kafka_schemas.py: StreamsGroupHeartbeat
and StreamsGroupDescribe v1, StreamsGroupTopologyDescriptionUpdate v0) that exercise every field
of Kafka 4.4's layouts: nulls and non-nulls, the fields v1 moved or added, empty and
multi-element lists, non-ASCII strings and the edges of the integer types.

Each sample is (Kafka's message class name, version, plain values in groupshift's field names,
the body bytes Kafka 4.4.0's own classes write for those values). The bytes were written by
`e2e/java_programs/StreamsWireOracle.java` (Kafka's JsonConverter reads the values, the
generated class writes them); `e2e/test_streams_wire_kafka.py` asks Kafka for them again, so a
sample edited here without its bytes fails there as well as in `tests/test_kafka_schemas.py`.
"""

from __future__ import annotations

from typing import Any

_TOPOLOGY = {
    "epoch": 2,
    "subtopologies": [
        {
            "subtopology_id": "0",
            "source_topics": ["words"],
            "source_topic_regex": [],
            "state_changelog_topics": [],
            "repartition_sink_topics": ["app-counts-repartition"],
            "repartition_source_topics": [],
            "copartition_groups": [],
        },
        {
            "subtopology_id": "1",
            "source_topics": [],
            "source_topic_regex": ["wörds-.*"],
            "state_changelog_topics": [
                {
                    "name": "app-counts-changelog",
                    "partitions": 0,
                    "replication_factor": -1,
                    "topic_configs": [{"key": "cleanup.policy", "value": "compact"}],
                }
            ],
            "repartition_sink_topics": [],
            "repartition_source_topics": [
                {
                    "name": "app-counts-repartition",
                    "partitions": 4,
                    "replication_factor": 3,
                    "topic_configs": [],
                }
            ],
            "copartition_groups": [
                {"source_topics": [0], "source_topic_regex": [0], "repartition_source_topics": [0, 1]}
            ],
        },
    ],
}

_DESCRIPTION = {
    "subtopologies": [
        {
            "subtopology_id": "0",
            "nodes": [
                {
                    "name": "KSTREAM-SOURCE-0000000000",
                    "node_type": 1,
                    "source_topics": ["words", "wörds-2"],
                    "sink_topic": None,
                    "stores": [],
                    "successors": ["KSTREAM-FLATMAPVALUES-0000000001"],
                },
                {
                    "name": "KSTREAM-FLATMAPVALUES-0000000001",
                    "node_type": 2,
                    "source_topics": [],
                    "sink_topic": None,
                    "stores": ["counts-store", "other-store"],
                    "successors": ["KSTREAM-SINK-0000000002"],
                },
                {
                    "name": "KSTREAM-SINK-0000000002",
                    "node_type": 3,
                    "source_topics": [],
                    "sink_topic": "app-counts-repartition",
                    "stores": [],
                    "successors": [],
                },
            ],
        },
        {"subtopology_id": "1", "nodes": []},
    ],
    "global_stores": [
        {
            "source": {
                "name": "KSTREAM-SOURCE-0000000009",
                "node_type": 1,
                "source_topics": ["global-in"],
                "sink_topic": None,
                "stores": [],
                "successors": ["KTABLE-SOURCE-0000000010"],
            },
            "processor": {
                "name": "KTABLE-SOURCE-0000000010",
                "node_type": 2,
                "source_topics": [],
                "sink_topic": None,
                "stores": ["global-store"],
                "successors": [],
            },
        }
    ],
}

_TASKS = [{"subtopology_id": "0", "partitions": [0, 2147483647]}, {"subtopology_id": "1", "partitions": []}]
_ASSIGNMENT = {
    "active_tasks": _TASKS,
    "standby_tasks": [],
    "warmup_tasks": [{"subtopology_id": "1", "partitions": [3]}],
}

_MEMBER = {
    "member_id": "m-ü",
    "member_epoch": 7,
    "instance_id": None,
    "rack_id": "rack-a",
    "client_id": "client",
    "client_host": "/127.0.0.1",
    "topology_epoch": 2,
    "process_id": "process-1",
    "user_endpoint": {"host": "localhost", "port": 65535},
    "client_tags": [{"key": "zone", "value": "z1"}],
    "task_offsets": [{"subtopology_id": "1", "partition": 0, "offset": 9223372036854775807}],
    "task_end_offsets": [],
    "assignment": _ASSIGNMENT,
    "target_assignment": {"active_tasks": [], "standby_tasks": _TASKS, "warmup_tasks": []},
    "is_classic": False,
}

_DESCRIBE_TOPOLOGY = {
    "epoch": 2,
    "subtopologies": [
        {
            "subtopology_id": "0",
            "source_topics": ["words"],
            "repartition_sink_topics": ["app-counts-repartition"],
            "state_changelog_topics": [],
            "repartition_source_topics": [
                {
                    "name": "app-counts-repartition",
                    "partitions": 4,
                    "replication_factor": 1,
                    "topic_configs": [{"key": "cleanup.policy", "value": "delete"}],
                }
            ],
        }
    ],
}

SAMPLES: list[tuple[str, int, dict[str, Any], str]] = [
    (
        "StreamsGroupHeartbeatRequestData",
        1,
        {
            "group_id": "app",
            "member_id": "m-ü",
            "member_epoch": 0,
            "endpoint_information_epoch": -1,
            "instance_id": "instance-1",
            "rack_id": None,
            "rebalance_timeout": 300000,
            "topology": _TOPOLOGY,
            "active_tasks": [],
            "standby_tasks": _TASKS,
            "warmup_tasks": None,
            "process_id": "process-1",
            "user_endpoint": {"host": "h", "port": 0},
            "client_tags": [{"key": "zone", "value": "z1"}],
            "task_offsets": None,
            "task_end_offsets": [{"subtopology_id": "1", "partition": 3, "offset": -1}],
            "shutdown_application": True,
        },
        (
            "04617070056d2dc3bc00000000ffffffff0b696e7374616e63652d3100000493e00100000002030230020677"
            "6f726473010102176170702d636f756e74732d7265706172746974696f6e010100023101020a77c3b6726473"
            "2d2e2a02156170702d636f756e74732d6368616e67656c6f6700000000ffff020f636c65616e75702e706f6c"
            "69637908636f6d7061637400000102176170702d636f756e74732d7265706172746974696f6e000000040003"
            "01000202000002000003000000010000000103023003000000007fffffff0002310100000a70726f63657373"
            "2d3101026800000002057a6f6e65037a31000002023100000003ffffffffffffffff000100"
        ),
    ),
    (
        "StreamsGroupHeartbeatRequestData",
        1,
        {
            "group_id": "app",
            "member_id": "m",
            "member_epoch": -2,
            "endpoint_information_epoch": 3,
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout": -1,
            "topology": None,
            "active_tasks": None,
            "standby_tasks": None,
            "warmup_tasks": None,
            "process_id": None,
            "user_endpoint": None,
            "client_tags": None,
            "task_offsets": None,
            "task_end_offsets": None,
            "shutdown_application": False,
        },
        "04617070026dfffffffe000000030000ffffffffff00000000ff0000000000",
    ),
    (
        "StreamsGroupHeartbeatResponseData",
        1,
        {
            "throttle_time": 0,
            "error_code": 0,
            "error_message": None,
            "member_id": "m-ü",
            "member_epoch": 2147483647,
            "heartbeat_interval": 5000,
            "task_offset_interval": 60000,
            "acceptable_recovery_lag": 9223372036854775807,
            "status": [
                {"status_code": 3, "status_detail": "Internal topics are missing: [x]"},
                {"status_code": 6, "status_detail": ""},
            ],
            "active_tasks": _TASKS,
            "standby_tasks": [],
            "warmup_tasks": None,
            "topology_description_required": True,
            "endpoint_information_epoch": 4,
            "partitions_by_user_endpoint": [
                {
                    "user_endpoint": {"host": "localhost", "port": 8080},
                    "active_partitions": [{"topic": "words", "partitions": [0, 1]}],
                    "standby_partitions": [],
                }
            ],
        },
        (
            "00000000000000056d2dc3bc7fffffff000013880000ea607fffffffffffffff030321496e7465726e616c20"
            "746f7069637320617265206d697373696e673a205b785d0006010003023003000000007fffffff0002310100"
            "01000100000004020a6c6f63616c686f73741f90000206776f72647303000000000000000100010000"
        ),
    ),
    (
        "StreamsGroupHeartbeatResponseData",
        1,
        {
            "throttle_time": 0,
            "error_code": 110,
            "error_message": "The member epoch is fenced.",
            "member_id": "",
            "member_epoch": 0,
            "heartbeat_interval": 0,
            "task_offset_interval": 0,
            "acceptable_recovery_lag": -1,
            "status": None,
            "active_tasks": None,
            "standby_tasks": None,
            "warmup_tasks": None,
            "topology_description_required": False,
            "endpoint_information_epoch": 0,
            "partitions_by_user_endpoint": None,
        },
        (
            "00000000006e1c546865206d656d6265722065706f63682069732066656e6365642e01000000000000000000"
            "000000ffffffffffffffff0000000000000000000000"
        ),
    ),
    (
        "StreamsGroupDescribeRequestData",
        1,
        {
            "group_ids": ["app", "äpp"],
            "include_authorized_operations": True,
            "include_topology_description": True,
        },
        "030461707005c3a47070010100",
    ),
    (
        "StreamsGroupDescribeRequestData",
        1,
        {"group_ids": [], "include_authorized_operations": False, "include_topology_description": False},
        "01000000",
    ),
    (
        "StreamsGroupDescribeResponseData",
        1,
        {
            "throttle_time": 10,
            "groups": [
                {
                    "error_code": 0,
                    "error_message": None,
                    "group_id": "app",
                    "group_state": "Stable",
                    "group_epoch": 5,
                    "assignment_epoch": 5,
                    "topology": _DESCRIBE_TOPOLOGY,
                    "members": [_MEMBER],
                    "authorized_operations": 3000,
                    "topology_description": _DESCRIPTION,
                    "topology_description_status": 3,
                    "assignor_name": "sticky",
                },
                {
                    "error_code": 69,
                    "error_message": "Group äpp not found.",
                    "group_id": "äpp",
                    "group_state": "Dead",
                    "group_epoch": -1,
                    "assignment_epoch": -1,
                    "topology": None,
                    "members": [],
                    "authorized_operations": -2147483648,
                    "topology_description": None,
                    "topology_description_status": 1,
                    "assignor_name": None,
                },
            ],
        },
        (
            "0000000a030000000461707007537461626c65000000050000000501000000020202300206776f7264730217"
            "6170702d636f756e74732d7265706172746974696f6e0102176170702d636f756e74732d7265706172746974"
            "696f6e000000040001020f636c65616e75702e706f6c6963790764656c6574650000000002056d2dc3bc0000"
            "000700077261636b2d6107636c69656e740b2f3132372e302e302e31000000020a70726f636573732d31010a"
            "6c6f63616c686f7374ffff0002057a6f6e65037a3100020231000000007fffffffffffffff00010302300300"
            "0000007fffffff000231010001020231020000000300000103023003000000007fffffff0002310100010000"
            "0000000bb801030230041a4b53545245414d2d534f555243452d30303030303030303030010306776f726473"
            "0977c3b67264732d32000102214b53545245414d2d464c41544d415056414c5545532d303030303030303030"
            "3100214b53545245414d2d464c41544d415056414c5545532d30303030303030303031020100030d636f756e"
            "74732d73746f72650c6f746865722d73746f726502184b53545245414d2d53494e4b2d303030303030303030"
            "3200184b53545245414d2d53494e4b2d303030303030303030320301176170702d636f756e74732d72657061"
            "72746974696f6e0101000002310100021a4b53545245414d2d534f555243452d303030303030303030390102"
            "0a676c6f62616c2d696e000102194b5441424c452d534f555243452d3030303030303030313000194b544142"
            "4c452d534f555243452d30303030303030303130020100020d676c6f62616c2d73746f726501000000030773"
            "7469636b790000451647726f757020c3a47070206e6f7420666f756e642e05c3a470700544656164ffffffff"
            "ffffffffff0180000000ff01000000"
        ),
    ),
    (
        "StreamsGroupTopologyDescriptionUpdateRequestData",
        0,
        {"group_id": "app", "member_id": "m-ü", "topology_epoch": 2, "topology_description": _DESCRIPTION},
        (
            "04617070056d2dc3bc00000002030230041a4b53545245414d2d534f555243452d3030303030303030303001"
            "0306776f7264730977c3b67264732d32000102214b53545245414d2d464c41544d415056414c5545532d3030"
            "303030303030303100214b53545245414d2d464c41544d415056414c5545532d303030303030303030310201"
            "00030d636f756e74732d73746f72650c6f746865722d73746f726502184b53545245414d2d53494e4b2d3030"
            "303030303030303200184b53545245414d2d53494e4b2d303030303030303030320301176170702d636f756e"
            "74732d7265706172746974696f6e0101000002310100021a4b53545245414d2d534f555243452d3030303030"
            "303030303901020a676c6f62616c2d696e000102194b5441424c452d534f555243452d303030303030303031"
            "3000194b5441424c452d534f555243452d30303030303030303130020100020d676c6f62616c2d73746f7265"
            "0100000000"
        ),
    ),
    (
        "StreamsGroupTopologyDescriptionUpdateRequestData",
        0,
        {
            "group_id": "",
            "member_id": "",
            "topology_epoch": -1,
            "topology_description": {"subtopologies": [], "global_stores": []},
        },
        "0101ffffffff01010000",
    ),
    (
        "StreamsGroupTopologyDescriptionUpdateResponseData",
        0,
        {
            "throttle_time": 0,
            "error_code": 35,
            "error_message": "The broker has no streams group topology description plugin configured.",
        },
        (
            "000000000023485468652062726f6b657220686173206e6f2073747265616d732067726f757020746f706f6c"
            "6f6779206465736372697074696f6e20706c7567696e20636f6e666967757265642e00"
        ),
    ),
]

API_KEYS = {
    "StreamsGroupHeartbeat": 88,
    "StreamsGroupDescribe": 89,
    "StreamsGroupTopologyDescriptionUpdate": 93,
}

_RENAMED = {
    "throttle_time": "throttleTimeMs",
    "heartbeat_interval": "heartbeatIntervalMs",
    "task_offset_interval": "taskOffsetIntervalMs",
    "rebalance_timeout": "rebalanceTimeoutMs",
}


def api_of(name: str) -> tuple[int, bool]:
    """(api key, is_request) of a Kafka message class name."""
    base = name.removesuffix("Data")
    if base.endswith("Request"):
        return API_KEYS[base.removesuffix("Request")], True
    return API_KEYS[base.removesuffix("Response")], False


def as_kafka_json(value: Any) -> Any:
    """The values in the shape of Kafka's `*JsonConverter` (camelCase, `...Ms` for durations)."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            head, *rest = k.split("_")
            out[_RENAMED.get(k, head + "".join(p.title() for p in rest))] = as_kafka_json(v)
        return out
    if isinstance(value, list):
        return [as_kafka_json(v) for v in value]
    return value
