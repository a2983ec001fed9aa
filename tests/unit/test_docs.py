"""The docs cannot drift from the code.

- Every relative link in the docs (README.md, docs/*.md, bench/README.md, bench/REPORT.md,
  charts/taintkeeper/README.md) leads to a file or directory of the repository, and every `#anchor`
  into a markdown file to one of its headings, named by GitHub's rules (an anchor GitHub would not find
  is a dead link there too).
- Every command-line flag the product's commands define is in docs/operating.md. The flags are read
  from the argparse parsers themselves (subcommands included), never from the source text; a parser
  built inside a function is caught as it is about to parse.
- Every row of docs/operating.md's flag tables names flags of its section's command (the webhook, the
  controller), with the default and the environment variable the code has.
- Every metric a doc names is exported, and every exported metric is in docs/operating.md.
- Every repository file a doc names in a code span exists, and every test it names is defined.
- Every import contract in pyproject.toml is explained in docs/architecture.md.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import re
import tomllib
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn
from unittest import mock
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]
OPERATING = ROOT / "docs" / "operating.md"
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def docs() -> list[Path]:
    """The markdown whose links are checked."""
    return [
        ROOT / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
        ROOT / "bench" / "README.md",
        ROOT / "bench" / "REPORT.md",
        ROOT / "charts" / "taintkeeper" / "README.md",
    ]


# --- reading markdown ------------------------------------------------------------------------------------

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# A code span: a run of backticks, then anything but a blank line, then the same run.
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)((?:(?!\n[ \t]*\n).)+?)(?<!`)\1(?!`)", re.S)


def without_code(text: str) -> str:
    """`text` with fenced blocks and code spans blanked, line numbers kept: no link is read in code."""
    kept: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        opening = FENCE.match(line)
        if fence is None and opening:
            fence = opening.group(1)
            kept.append("")
        elif fence is not None:
            closing = FENCE.match(line)
            if (
                closing
                and closing.group(1)[0] == fence[0]
                and len(closing.group(1)) >= len(fence)
                and not line.strip().lstrip(fence[0])
            ):
                fence = None
            kept.append("")
        else:
            kept.append(line)
    return CODE_SPAN.sub(lambda span: "\n" * span.group(0).count("\n"), "\n".join(kept))


INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>\n]*>|[^\s)]+)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
REFERENCE_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:[ \t]*(<[^>\n]*>|\S+)", re.M)
HTML_LINK = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)=\"([^\"]*)\"", re.I)


@dataclass(frozen=True)
class Link:
    line: int
    target: str


def links(text: str) -> list[Link]:
    """Every link target outside code, in order: inline links and images, reference definitions, HTML."""
    prose = without_code(text)
    found = [
        (match.start(1), match.group(1))
        for pattern in (INLINE_LINK, REFERENCE_DEFINITION, HTML_LINK)
        for match in pattern.finditer(prose)
    ]
    return [
        Link(prose.count("\n", 0, start) + 1, target.removeprefix("<").removesuffix(">"))
        for start, target in sorted(found)
    ]


def is_relative(target: str) -> bool:
    """Not a URL with a scheme (https:, mailto:) and not protocol-relative (//host)."""
    return not re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", target) and not target.startswith("//")


HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
HTML_ANCHOR = re.compile(r"<a\s[^>]*\b(?:name|id)=\"([^\"]+)\"", re.I)


def heading_text(markdown: str) -> str:
    """What a heading renders as: code spans, links and images by their text, no emphasis or HTML."""
    text = re.sub(r"(`+)(.+?)\1", lambda span: span.group(2).strip(), markdown)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"<[^>]+>", "", text)  # emphasis marks (`*`) are punctuation: slug() drops them


def slug(text: str) -> str:
    """GitHub's anchor for a heading's text (github-slugger): lower case; letters, digits, marks, `-`
    and `_` kept, every other character dropped; each space a hyphen."""
    kept = (
        ch
        for ch in heading_text(text).strip().lower()
        if ch in " -_" or ch.isalnum() or unicodedata.category(ch).startswith("M")
    )
    return "".join("-" if ch == " " else ch for ch in kept)


def anchors(text: str) -> list[str]:
    """Every anchor of a markdown file, in order: its headings' (a repeated one gets -1, -2, ...) and
    explicit HTML anchors."""
    seen: dict[str, int] = {}
    result: list[str] = []
    for line in without_code(text).split("\n"):
        heading = HEADING.match(line)
        if heading:
            base = slug(heading.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            result.append(base if count == 0 else f"{base}-{count}")
        result += HTML_ANCHOR.findall(line)
    return result


def broken(doc: Path, link: Link) -> str | None:
    """Why a relative link from `doc` leads nowhere, or None when it leads somewhere."""
    path_part, _, fragment = link.target.partition("#")
    path_part = unquote(path_part.split("?")[0])
    if not path_part:
        target = doc
    elif path_part.startswith("/"):
        target = ROOT / path_part.lstrip("/")
    else:
        target = doc.parent / path_part
    target = target.resolve()
    shown = target.relative_to(ROOT) if target.is_relative_to(ROOT) else target
    if not target.is_relative_to(ROOT):
        return f"leads out of the repository, to {shown}"
    if not target.exists():
        return f"no such file: {shown}"
    if fragment and target.suffix == ".md":
        known = anchors(target.read_text())
        if unquote(fragment).lower() not in known:
            near = difflib.get_close_matches(unquote(fragment).lower(), known, n=3)
            hint = f" (did you mean {', '.join('#' + a for a in near)}?)" if near else ""
            return f"no heading in {shown} has the anchor #{fragment}{hint}"
    return None


# --- the links -----------------------------------------------------------------------------------------------

LINKS_FOUND = [
    ("an inline link", "see [the docs](docs/a.md).", ["docs/a.md"]),
    ("an image", "![a picture](docs/x.svg)", ["docs/x.svg"]),
    ("a title is not part of the target", '[a](b.md "the title")', ["b.md"]),
    ("a target in angle brackets", "[a](<b c.md>)", ["b c.md"]),
    ("link text across two lines", "[the\ndocs](b.md#part)", ["b.md#part"]),
    ("a code span in the link text", "[`make test`](Makefile)", ["Makefile"]),
    ("a reference definition", "[docs]: docs/a.md", ["docs/a.md"]),
    ("an HTML link", '<a href="docs/a.md">a</a>', ["docs/a.md"]),
    ("no link in a code span", "run `[a](b.md)` as is", []),
    ("no link in a code span across lines", "`x\n[a](b.md)`", []),
    ("no link in a fenced block", "```\n[a](b.md)\n```\n[c](d.md)", ["d.md"]),
    ("no link in a longer fence", "````\n```\n[a](b.md)\n```\n````", []),
    ("no link in a tilde fence", "~~~\n[a](b.md)\n~~~", []),
]


@pytest.mark.parametrize(("text", "targets"), [c[1:] for c in LINKS_FOUND], ids=[c[0] for c in LINKS_FOUND])
def test_links_are_read_from_prose_only(text, targets):
    assert [link.target for link in links(text)] == targets


def test_a_link_knows_its_line():
    assert links("one\n`two`\n```\nthree\n```\n[four](4.md)") == [Link(6, "4.md")]


RELATIVE = [
    ("a path", "docs/a.md", True),
    ("a path up", "../README.md#top", True),
    ("an anchor in the same file", "#layout", True),
    ("https", "https://github.com/kubernetes/kubernetes/issues/1", False),
    ("mailto", "mailto:someone@example.com", False),
    ("protocol-relative", "//example.com/x", False),
]


@pytest.mark.parametrize(("target", "relative"), [c[1:] for c in RELATIVE], ids=[c[0] for c in RELATIVE])
def test_only_relative_links_are_checked(target, relative):
    assert is_relative(target) is relative


SLUGS = [
    ("lower case, spaces become hyphens", "The local control plane", "the-local-control-plane"),
    (
        "an apostrophe and a colon are dropped",
        "A dead node's StatefulSet pods: fencing",
        "a-dead-nodes-statefulset-pods-fencing",
    ),
    ("a code span keeps its text", "`explain` and `status`", "explain-and-status"),
    ("a link keeps its text", "[Tests](tests.md) and more", "tests-and-more"),
    ("emphasis is dropped", "**Bold** *move*", "bold-move"),
    ("underscores and hyphens stay", "snake_case and kebab-case", "snake_case-and-kebab-case"),
    ("each space is a hyphen", "a - b", "a---b"),
    ("punctuation goes", "What? (Really!) 1.20/1.21", "what-really-120121"),
    ("letters beyond ASCII stay", "Über Größe", "über-größe"),
]


@pytest.mark.parametrize(("heading", "anchor"), [c[1:] for c in SLUGS], ids=[c[0] for c in SLUGS])
def test_headings_get_githubs_anchors(heading, anchor):
    assert slug(heading) == anchor


def test_a_repeated_heading_gets_a_numbered_anchor():
    assert anchors("# Tests\n## Tests\n### Tests\n") == ["tests", "tests-1", "tests-2"]


def test_a_heading_in_a_fenced_block_has_no_anchor():
    assert anchors("```sh\n# not a heading\n```\n## Real\n") == ["real"]


def test_an_html_anchor_counts():
    assert anchors('<a name="here"></a>\n') == ["here"]


@pytest.mark.parametrize("doc", docs(), ids=[str(doc.relative_to(ROOT)) for doc in docs()])
def test_every_relative_link_leads_to_an_existing_file_and_heading(doc):
    assert doc.is_file(), f"{doc.relative_to(ROOT)} is gone: update docs() in this test"
    dead = [
        f"{doc.relative_to(ROOT)}:{link.line}: ({link.target}) {why}"
        for link in links(doc.read_text())
        if is_relative(link.target)
        if (why := broken(doc, link)) is not None
    ]
    assert not dead, "dead links:\n" + "\n".join(dead)


def test_every_doc_is_linked_from_the_readme():
    readme = ROOT / "README.md"
    linked = {
        (readme.parent / unquote(link.target.partition("#")[0])).resolve()
        for link in links(readme.read_text())
        if is_relative(link.target)
    }
    unlisted = [str(doc.relative_to(ROOT)) for doc in sorted((ROOT / "docs").glob("*.md")) if doc not in linked]
    assert not unlisted, f"README.md's Documentation list does not link {', '.join(unlisted)}"


# --- the flags ------------------------------------------------------------------------------------------------


class _Captured(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        super().__init__(parser.prog)
        self.parser = parser


def _capture(parser: argparse.ArgumentParser, *_args: object, **_kwargs: object) -> NoReturn:
    raise _Captured(parser)


def parser_built_by(command: Callable[[], object]) -> argparse.ArgumentParser:
    """The parser `command` builds, taken as it is about to parse (nothing after that runs)."""
    with mock.patch.object(argparse.ArgumentParser, "parse_args", _capture):
        try:
            command()
        except _Captured as captured:
            return captured.parser
    raise AssertionError(f"{command} parsed no command line")


def webhook_parser() -> argparse.ArgumentParser:
    from webhook.__main__ import parse_args

    return parser_built_by(lambda: parse_args([]))


def controller_parser() -> argparse.ArgumentParser:
    from controller.options import build_parser

    return build_parser()


def explain_parser() -> argparse.ArgumentParser:
    from kubectl_taintkeeper.explain import main

    return parser_built_by(lambda: main([]))


def status_parser() -> argparse.ArgumentParser:
    from kubectl_taintkeeper.status_command import build_parser

    return build_parser()


def fencing_parser(command: str) -> Callable[[], argparse.ArgumentParser]:
    def build() -> argparse.ArgumentParser:
        from kubectl_taintkeeper.fencing_command import parse_args

        return parser_built_by(lambda: parse_args(command, []))

    return build


def certs_parser() -> argparse.ArgumentParser:
    from certs.__main__ import build_parser

    return build_parser()


def certs_sync_parser() -> argparse.ArgumentParser:
    from certs.sync import main

    return parser_built_by(lambda: main([]))


def kubectl_plugin_parser() -> argparse.ArgumentParser:
    from kubectl_taintkeeper.plugin import build_parser

    return build_parser()


# (command, its parser): every command the product installs or dispatches to.
COMMANDS: list[tuple[str, Callable[[], argparse.ArgumentParser]]] = [
    ("python -m webhook", webhook_parser),
    ("python -m controller", controller_parser),
    ("python -m controller explain", explain_parser),
    ("python -m controller status", status_parser),
    ("python -m controller fence", fencing_parser("fence")),
    ("python -m controller unfence", fencing_parser("unfence")),
    ("python -m certs", certs_parser),
    ("python -m certs sync", certs_sync_parser),
    ("kubectl taintkeeper", kubectl_plugin_parser),
]
# The console scripts' modules whose commands COMMANDS covers (pyproject.toml [project.scripts]).
COVERED_ENTRY_POINTS = {"webhook.__main__", "controller.__main__", "certs.__main__", "kubectl_taintkeeper.plugin"}


def flags(parser: argparse.ArgumentParser, prog: str) -> Iterator[tuple[str, str]]:
    """(subcommand, flag) for every option string of `parser` and its subcommands, but --help."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, subparser in action.choices.items():
                yield from flags(subparser, f"{prog} {name}")
        elif not isinstance(action, argparse._HelpAction):
            for option in action.option_strings:
                yield prog, option


def mentioned(flag: str, text: str) -> bool:
    """A long flag as a whole word anywhere (`--leader-elect` is not in `--leader-elect-retry-period`);
    a short one (`-n`) only where a code span starts with it."""
    if flag.startswith("--"):
        return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text) is not None
    return re.search(rf"`{re.escape(flag)}(?=[`\s=])", text) is not None


FLAGS_MENTIONED = [
    ("a long flag in a table", "| `--port` | 10258 |", "--port", True),
    ("a long flag with its value", "`--port=0`", "--port", True),
    ("a longer flag is not the flag", "`--leader-elect-retry-period`", "--leader-elect", False),
    ("a flag is not part of a longer one", "`--leader-elect`", "--leader-elect-retry-period", False),
    ("a short flag in a code span", "`-o json` / `--output json`", "-o", True),
    ("a short flag outside a code span", "ctr -n k8s.io images import", "-n", False),
]


@pytest.mark.parametrize(
    ("text", "flag", "found"), [c[1:] for c in FLAGS_MENTIONED], ids=[c[0] for c in FLAGS_MENTIONED]
)
def test_a_flag_is_mentioned_as_itself(text, flag, found):
    assert mentioned(flag, text) is found


def test_flags_are_read_from_subcommands_too():
    parser = argparse.ArgumentParser(prog="tool")
    parser.add_argument("--top")
    sub = parser.add_subparsers().add_parser("sub")
    sub.add_argument("-s", "--deep")
    assert list(flags(parser, "tool")) == [("tool", "--top"), ("tool sub", "-s"), ("tool sub", "--deep")]


def test_a_parser_built_inside_a_function_is_caught_before_it_parses():
    def command() -> None:
        parser = argparse.ArgumentParser(prog="inner")
        parser.add_argument("--inside")
        parser.parse_args(["--unknown"])  # would exit 2 if it ran
        raise AssertionError("ran past parse_args")

    assert [flag for _, flag in flags(parser_built_by(command), "inner")] == ["--inside"]


@pytest.mark.parametrize("build", [c[1] for c in COMMANDS], ids=[c[0] for c in COMMANDS])
def test_every_flag_of_the_command_is_in_operating_md(build):
    text = OPERATING.read_text()
    parser = build()
    defined = list(flags(parser, parser.prog))
    assert defined, f"{parser.prog} defines no flag: is this the parser?"
    missing = [f"{prog} {flag}" for prog, flag in defined if not mentioned(flag, text)]
    assert not missing, "docs/operating.md does not mention these flags:\n" + "\n".join(missing)


def test_every_webhook_environment_variable_is_in_operating_md():
    from webhook.settings import APP_SETTINGS, SERVING_SETTINGS

    text = OPERATING.read_text()
    missing = [f"{s.env} ({s.flag})" for s in (*APP_SETTINGS, *SERVING_SETTINGS) if s.env not in text]
    assert not missing, "docs/operating.md does not mention these environment variables:\n" + "\n".join(missing)


def test_every_console_script_has_its_flags_checked():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    unchecked = [
        f"{name} ({target})" for name, target in scripts.items() if target.partition(":")[0] not in COVERED_ENTRY_POINTS
    ]
    assert not unchecked, f"add these commands' parsers to COMMANDS in this test: {', '.join(unchecked)}"


# --- the flag tables ------------------------------------------------------------------------------------------
# docs/operating.md's tables of the webhook's and the controller's flags: each row's flags are the command's,
# and its default (and the webhook's environment variable) is the one the code has.

# What a table writes for an empty default.
NO_VALUE = {"none", "empty", "all off"}


@dataclass(frozen=True)
class FlagRow:
    line: int
    section: str  # the `## ` heading the table sits under
    cells: dict[str, str]  # column header -> cell


def flag_rows(text: str) -> list[FlagRow]:
    """Every row of a table whose first column is `flag`, with the section it is in."""
    rows: list[FlagRow] = []
    section, header = "", None
    for number, line in enumerate(text.split("\n"), start=1):
        if line.startswith("## "):
            section, header = line[3:].strip(), None
        if not line.startswith("|"):
            header = None
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        if cells[0] == "flag":
            header = cells
        elif header is not None and not set(line) <= set("|- "):
            rows.append(FlagRow(number, section, dict(zip(header, cells, strict=True))))
    return rows


def cell_flags(cell: str) -> list[str]:
    return re.findall(r"`(--[a-z0-9-]+)`", cell)


def cell_values(cell: str, count: int) -> list[str]:
    """A cell's `count` values: `a` / `b` or `a`, `b` one per flag, `x.{a,b}` spelled out, one value for all;
    a note in parentheses dropped, and a word for "no value" read as empty."""
    braces = re.fullmatch(r"`([^`{]*)\{([^}`]*)\}([^`]*)`", cell)
    if braces:
        parts = [f"{braces[1]}{middle}{braces[3]}" for middle in braces[2].split(",")]
    else:
        parts = re.split(r" / |, (?=`)", cell) if count > 1 else [cell]
    values = [re.sub(r"\s*\([^)]*\)$", "", part.strip()).strip("`") for part in parts]
    values = ["" if value in NO_VALUE else value for value in values]
    return values * count if len(values) == 1 else values


CELLS_READ = [
    ("one value", "`5s`", 1, ["5s"]),
    ("one per flag, by slashes", "`15s` / `10s` / `2s`", 3, ["15s", "10s", "2s"]),
    ("one per flag, by commas", "`0.0.0.0`, `10258`", 2, ["0.0.0.0", "10258"]),
    ("a comma inside a value", "`taintkeeper-system,kube-system`", 1, ["taintkeeper-system,kube-system"]),
    ("braces spelled out", "`/tls/tls.{crt,key}`", 2, ["/tls/tls.crt", "/tls/tls.key"]),
    ("a note dropped", "`0` (off)", 1, ["0"]),
    ("a word for no value", "none", 1, [""]),
    ("one value for every flag", "`300`", 2, ["300", "300"]),
]


@pytest.mark.parametrize(("cell", "count", "values"), [c[1:] for c in CELLS_READ], ids=[c[0] for c in CELLS_READ])
def test_a_cell_gives_one_value_per_flag(cell, count, values):
    assert cell_values(cell, count) == values


def test_flag_rows_are_read_from_flag_tables_only():
    text = (
        "## The tool\n\n| flag | default | meaning |\n|---|---|---|\n| `--a` | `1` | x |\n\n"
        "| key | value |\n|---|---|\n| `--not-a-flag-row` | 2 |\n## Other\n| flag | default |\n| `--b` | none |\n"
    )
    assert [(row.line, row.section, row.cells) for row in flag_rows(text)] == [
        (5, "The tool", {"flag": "`--a`", "default": "`1`", "meaning": "x"}),
        (12, "Other", {"flag": "`--b`", "default": "none"}),
    ]


@functools.cache
def flags_in_code() -> dict[str, dict[str, tuple[str, str | None]]]:
    """What the code has, by section: flag -> (default, environment variable or None)."""
    from webhook.settings import APP_SETTINGS, SERVING_SETTINGS

    Known = dict[str, tuple[str, str | None]]
    controller: Known = {
        option: ("" if action.default is None else str(action.default), None)
        for action in controller_parser()._actions
        if not isinstance(action, argparse._HelpAction)
        for option in action.option_strings
    }
    webhook: Known = {setting.flag: (setting.default, setting.env) for setting in (*APP_SETTINGS, *SERVING_SETTINGS)}
    return {"The webhook": webhook, "The controller": controller}


def test_operating_md_has_the_webhooks_and_the_controllers_flag_tables():
    assert {row.section for row in flag_rows(OPERATING.read_text())} == set(flags_in_code())


@pytest.mark.parametrize("row", flag_rows(OPERATING.read_text()), ids=lambda row: f"line {row.line}")
def test_every_flag_row_of_operating_md_matches_the_code(row):
    known = flags_in_code()[row.section]
    flags_named = cell_flags(row.cells["flag"])
    assert flags_named, f"docs/operating.md:{row.line}: no flag in the row"
    defaults = cell_values(row.cells["default"], len(flags_named))
    envs = cell_values(row.cells.get("environment variable", ""), len(flags_named))
    for index, flag in enumerate(flags_named):
        assert flag in known, f"docs/operating.md:{row.line}: {row.section} has no flag {flag}"
        default, env = known[flag]
        assert defaults[index] == default, f"docs/operating.md:{row.line}: {flag}'s default is {default!r}"
        if env is not None:
            assert envs[index] == env, f"docs/operating.md:{row.line}: {flag}'s environment variable is {env}"


# --- the metrics -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("doc", docs(), ids=[str(doc.relative_to(ROOT)) for doc in docs()])
def test_every_metric_a_doc_names_is_exported(doc):
    from tests.support.exported_metrics import exported_families, exported_series, series_named

    unknown = sorted(series_named(doc.read_text()) - exported_series() - set(exported_families()))
    assert not unknown, f"{doc.relative_to(ROOT)} names metrics controller/ and webhook/ do not export: {unknown}"


def test_every_exported_metric_is_in_operating_md():
    """By its name (a series of it: `_total`, `_bucket`), or by its subsystem's (`node_collector_*`)."""
    from tests.support.exported_metrics import exported_families

    text = OPERATING.read_text()
    subsystems = tuple(re.findall(r"`(\w+_)\*`", text))
    missing = sorted(
        family
        for family in exported_families()
        if not re.search(rf"\b{family}(?:_total|_bucket|_count|_sum)?\b", text) and not family.startswith(subsystems)
    )
    assert not missing, f"docs/operating.md does not name these metrics: {missing}"


# --- the code the docs name ------------------------------------------------------------------------------------

# A file in a code span: directories, then a name with one of these extensions.
CODE_PATH = re.compile(r"`((?:[\w.-]+/)+[\w.-]+\.(?:py|md|yaml|yml|sh|toml|svg|json|txt|tpl))`")


def top_directories() -> set[str]:
    """The repository's top directories (not hidden ones such as .venv and .local, nor the egg-info)."""
    return {
        path.name
        for path in ROOT.iterdir()
        if path.is_dir() and not path.name.startswith(".") and not path.name.endswith(".egg-info")
    }


@pytest.mark.parametrize("doc", docs(), ids=[str(doc.relative_to(ROOT)) for doc in docs()])
def test_every_repository_file_a_doc_names_in_code_exists(doc):
    """`kube/clock_offset.py` in a code span is not a link, but it names a file all the same. Paths
    outside the repository's directories (`DIR/...`, `.local/...`: what a run writes) are not checked."""
    tops = top_directories()
    gone = sorted(
        path
        for path in set(CODE_PATH.findall(doc.read_text()))
        if path.split("/")[0] in tops and not (ROOT / path).exists()
    )
    assert not gone, f"{doc.relative_to(ROOT)} names files that do not exist: {gone}"


def defined_tests() -> set[str]:
    return {name for path in (ROOT / "tests").rglob("*.py") for name in re.findall(r"def (test_\w+)", path.read_text())}


@pytest.mark.parametrize("doc", docs(), ids=[str(doc.relative_to(ROOT)) for doc in docs()])
def test_every_test_a_doc_names_exists(doc):
    named = set(re.findall(r"`(test_\w+)`", doc.read_text()))
    gone = sorted(named - defined_tests())
    assert not gone, f"{doc.relative_to(ROOT)} names tests that tests/ does not define: {gone}"


# --- the import contracts --------------------------------------------------------------------------------------

CONTRACTS = [
    contract["id"]
    for contract in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
]


@pytest.mark.parametrize("contract", CONTRACTS)
def test_every_import_contract_is_explained_in_architecture_md(contract):
    assert f"`{contract}`" in ARCHITECTURE.read_text(), (
        f"docs/architecture.md (Import contracts) does not explain the contract `{contract}` of pyproject.toml"
    )


# --- the layout table ------------------------------------------------------------------------------------

DEVELOPMENT = ROOT / "docs" / "development.md"
PRODUCT_PACKAGES = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]


def layout_rows() -> dict[str, str]:
    """docs/development.md's Layout table: package -> what its row says."""
    rows = {}
    for line in DEVELOPMENT.read_text().splitlines():
        found = re.match(r"\| `([a-z_]+)/` \| (.*) \|$", line)
        if found:
            rows[found[1]] = found[2]
    return rows


@pytest.mark.parametrize("package", PRODUCT_PACKAGES)
def test_every_product_file_is_in_the_layout_table(package):
    row = layout_rows().get(package)
    assert row is not None, f"docs/development.md's Layout table has no row for {package}/"
    unnamed = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / package).rglob("*.py"))
        if path.name != "__init__.py" and f"`{path.name}`" not in row
    ]
    assert not unnamed, f"docs/development.md's Layout row for {package}/ does not name: {', '.join(unnamed)}"
