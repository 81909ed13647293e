"""Kafka error codes the coordinator produces (`org.apache.kafka.common.protocol.Errors`).

One error style for handlers, in both protocols: a handler refuses a request by raising
`CoordinatorError(code, message)`; the operation boundary (`Shard._run`, or the
ConsumerGroupHeartbeat entry) turns it into the response's error code (and message, where the API
has one), logs a `request.rejected` event, and keeps nothing else of the operation: no record, no
timer change, no completion.

A handler returns an error response instead only when the refusal itself changes state that must
stay: a classic group changed in place as Kafka's classic paths do (a member removed because the
group is full, a parked request answered), or a timer the refusal arms (a classic member of a
consumer group told to rejoin gets a join timer). Those paths log their own `request.rejected`.
"""

from __future__ import annotations

from enum import IntEnum


class Errors(IntEnum):
    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    MESSAGE_TOO_LARGE = 10
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    INVALID_CONFIG = 40
    KAFKA_STORAGE_ERROR = 56
    UNKNOWN_PRODUCER_ID = 59
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    GROUP_ID_NOT_FOUND = 69
    NON_EMPTY_GROUP = 68
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    MEMBER_ID_REQUIRED = 79
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    UNSTABLE_OFFSET_COMMIT = 88
    UNKNOWN_TOPIC_ID = 100
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    INVALID_REGULAR_EXPRESSION = 128
    STREAMS_INVALID_TOPOLOGY = 130


class CoordinatorError(Exception):
    """A request failed with a Kafka error code; `message` is what Kafka would say."""

    def __init__(self, code: Errors, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"CoordinatorError({self.code.name}, {self.message!r})"


def invalid_request(message: str) -> CoordinatorError:
    return CoordinatorError(Errors.INVALID_REQUEST, message)


# Kafka `CoordinatorOperationExceptionHelper` / `appendGroupMetadataErrorToResponseError`:
# how a failed append of an operation's records is reported to the client.
_APPEND_ERRORS = {
    Errors.UNKNOWN_TOPIC_OR_PARTITION: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_ENOUGH_REPLICAS: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.REQUEST_TIMED_OUT: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_LEADER_OR_FOLLOWER: Errors.NOT_COORDINATOR,
    Errors.KAFKA_STORAGE_ERROR: Errors.NOT_COORDINATOR,
    Errors.MESSAGE_TOO_LARGE: Errors.UNKNOWN_SERVER_ERROR,
    Errors.RECORD_LIST_TOO_LARGE: Errors.UNKNOWN_SERVER_ERROR,
    Errors.INVALID_FETCH_SIZE: Errors.UNKNOWN_SERVER_ERROR,
    Errors.NETWORK_EXCEPTION: Errors.COORDINATOR_LOAD_IN_PROGRESS,
}


def append_error_to_response(error: Errors) -> Errors:
    return _APPEND_ERRORS.get(error, error)


class AppendError(Exception):
    """The runtime could not append an operation's records (raised by the shard's journal).

    `code` is the append's own error (e.g. KAFKA_STORAGE_ERROR, MESSAGE_TOO_LARGE); the client
    is answered with `append_error_to_response(code)`."""

    def __init__(self, code: Errors, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message
