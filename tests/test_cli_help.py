"""Every flag and positional of every `groupshift` command has help text (issue 28, point 7),
and an unknown option is reported by the sub-command that was parsing, with its usage."""

from __future__ import annotations

import argparse

import pytest

from groupshift.cli import build_parser, innermost_parser, main


def _without_help(parser: argparse.ArgumentParser, path: str) -> list[str]:
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                missing += _without_help(sub, f"{path} {name}")
        elif not action.help and not isinstance(action, argparse._HelpAction):
            missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    return missing


def test_every_flag_and_positional_has_help() -> None:
    assert _without_help(build_parser(), "groupshift") == []


@pytest.mark.parametrize(
    ("argv", "prog"),
    [
        (["groups", "--bootstrap-server", "h:1", "describe", "g"], "groupshift groups describe"),
        (["records", "dump", "p"], "groupshift records dump"),
        (["simulate"], "groupshift simulate"),
    ],
)
def test_the_innermost_parser_is_the_chosen_sub_command(argv: list[str], prog: str) -> None:
    parser = build_parser()
    assert innermost_parser(parser, parser.parse_args(argv)).prog == prog


def test_an_unknown_option_gets_the_sub_command_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["records", "dump", "--bogus", "p"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: groupshift records dump ")
    assert err.splitlines()[-1] == "groupshift records dump: error: unrecognized arguments: --bogus"


def test_groups_options_go_either_side_of_the_sub_command() -> None:
    parser = build_parser(["groups"])
    before = parser.parse_args(["groups", "--bootstrap-server", "h:1", "--json", "--timeout", "2", "list"])
    after = parser.parse_args(["groups", "list", "--bootstrap-server", "h:1", "--json", "--timeout", "2"])
    for args in (before, after):
        assert (args.bootstrap_server, args.json, args.timeout) == ("h:1", True, 2.0)
    described = parser.parse_args(
        ["groups", "--bootstrap-server", "h:1", "describe", "a", "b", "--group", "c"]
    )
    assert (described.group_names, described.group_options, described.all_groups) == (
        ["a", "b"],
        ["c"],
        False,
    )
