"""The argument parser of every command: argparse, with each error one line on stderr and exit 2.

argparse prints its usage block before an error; scripts, tests and operators read the reason, so
every command prints only `LABEL: error: MESSAGE` (argparse's own wording of MESSAGE kept).
"""

from __future__ import annotations

import argparse
import functools
from typing import Any, NoReturn

USAGE_ERROR = 2  # argparse's own exit code for a bad command line


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse whose errors are one line, `LABEL: error: MESSAGE` on stderr, and exit code 2.

    `label` names the program in that line where it is not `prog` (`webhook` for `python -m webhook`);
    by default it is `prog`. A subcommand's parser (`add_subparsers().add_parser`) keeps its parent's
    label, so every error of one command line names the same program.
    """

    def __init__(self, *args: Any, label: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.label = self.prog if label is None else label

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_ERROR, f"{self.label}: error: {message}\n")

    def add_subparsers(self, **kwargs: Any) -> Any:
        kwargs.setdefault("parser_class", functools.partial(type(self), label=self.label))
        return super().add_subparsers(**kwargs)
