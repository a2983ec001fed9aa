"""plumbing.arguments: every command's parser errs in one line, `LABEL: error: MESSAGE`, and exits 2.

Each command's own lines, byte for byte, are tested with the command (tests/unit/webhook/test_settings.py,
tests/unit/certs, tests/unit/kubectl_taintkeeper, tests/integration/test_simulator.py).
"""

from __future__ import annotations

import pytest

from plumbing.arguments import OneLineErrorParser


def failure(parser: OneLineErrorParser, argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[object, str, str]:
    """(exit code, stdout, stderr) of parsing `argv`."""
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(argv)
    out, err = capsys.readouterr()
    return exited.value.code, out, err


def test_an_error_is_one_line_naming_the_program_and_exit_2(capsys):
    parser = OneLineErrorParser(prog="tool")
    parser.add_argument("--count", type=int)
    assert failure(parser, ["--count", "x"], capsys) == (
        2,
        "",
        "tool: error: argument --count: invalid int value: 'x'\n",
    )
    assert failure(parser, ["--nope"], capsys) == (2, "", "tool: error: unrecognized arguments: --nope\n")


def test_a_label_names_the_program_where_prog_does_not(capsys):
    parser = OneLineErrorParser(prog="python -m tool", label="tool")
    assert failure(parser, ["extra"], capsys) == (2, "", "tool: error: unrecognized arguments: extra\n")
    assert parser.format_usage() == "usage: python -m tool [-h]\n"  # prog still names it in its usage


def test_a_subcommand_errs_with_its_programs_label(capsys):
    parser = OneLineErrorParser(prog="kubectl tool")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run")
    run.add_argument("name")
    assert type(run) is OneLineErrorParser and run.prog == "kubectl tool run"
    assert failure(parser, ["run"], capsys) == (
        2,
        "",
        "kubectl tool: error: the following arguments are required: name\n",
    )
    assert failure(parser, ["walk"], capsys)[2].startswith("kubectl tool: error: argument command: invalid choice")


def test_help_is_argparses(capsys):
    parser = OneLineErrorParser(prog="tool", label="t", description="Does things.")
    assert failure(parser, ["--help"], capsys) == (
        0,
        "usage: tool [-h]\n\nDoes things.\n\noptions:\n  -h, --help  show this help message and exit\n",
        "",
    )
