"""`groupshift acls` arguments checked as kafka-acls.sh (AclCommand) checks them, before any
connection; e2e/test_kafka_secured.py runs the command against Kafka's StandardAuthorizer."""

from __future__ import annotations

import argparse

import pytest

from tools.acls.command import AclInputError, add_parser, entries_of, operation_code, validate


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(), "acls")
    return parser.parse_args(["acls", "--bootstrap-server", "127.0.0.1:1", *argv])


def test_operations_are_read_as_kafka_spells_them() -> None:
    assert operation_code("Read") == 3
    assert operation_code("describe_configs") == operation_code("DescribeConfigs") == 10
    assert operation_code("ClusterAction") == 9
    with pytest.raises(AclInputError, match="not an operation"):
        operation_code("Any")  # a filter value, not an operation one can grant


def test_entries_default_to_all_operations_on_every_host() -> None:
    args = parse("--add", "--group", "g", "--allow-principal", "User:a", "--deny-principal", "User:b")
    validate(args)
    assert entries_of(args) == [("User:a", "*", 2, "ALLOW"), ("User:b", "*", 2, "DENY")]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--list", "--add"), "exactly one"),
        (("--add", "--allow-principal", "User:a"), "name a resource"),
        (("--add", "--topic", "t"), "needs --allow-principal"),
        (("--add", "--topic", "t", "--allow-principal", "alice"), "TYPE:NAME"),
        (
            ("--add", "--topic", "t", "--allow-principal", "User:a", "--resource-pattern-type", "any"),
            "literal or",
        ),
        (
            ("--add", "--group", "g", "--allow-principal", "User:a", "--operation", "Write"),
            "GROUP only supports",
        ),
        (("--list", "--allow-host", "10.0.0.1"), "go with"),
        (("--list", "--resource-pattern-type", "regex"), "literal, prefixed, any or match"),
    ],
)
def test_refusals_name_the_problem(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(AclInputError, match=message):
        validate(parse(*argv))
