"""The kubectl plugin's command line (kubectl_taintkeeper/plugin.py) and the installed console scripts."""

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from kubectl_taintkeeper import plugin as kubectl_plugin
from kubectl_taintkeeper.plugin import ExplainNode, parse_args

ROOT = Path(__file__).resolve().parents[3]

GOOD = [
    ("a node name", ["explain", "node", "n1"], {}, ExplainNode("n1", None)),
    ("--kubeconfig after the name", ["explain", "node", "n1", "--kubeconfig", "/k"], {}, ExplainNode("n1", "/k")),
    ("--kubeconfig before the command", ["--kubeconfig=/k", "explain", "node", "n1"], {}, ExplainNode("n1", "/k")),
    ("KUBECONFIG from the environment", ["explain", "node", "n1"], {"KUBECONFIG": "/a:/b"}, ExplainNode("n1", "/a:/b")),
    (
        "--kubeconfig over KUBECONFIG",
        ["explain", "node", "n1", "--kubeconfig", "/k"],
        {"KUBECONFIG": "/e"},
        ExplainNode("n1", "/k"),
    ),
    ("an empty KUBECONFIG is none", ["explain", "node", "n1"], {"KUBECONFIG": ""}, ExplainNode("n1", None)),
    (
        "the controller's --controllers and --feature-gates are passed on",
        [
            "explain",
            "node",
            "n1",
            "--controllers=*,-out-of-service",
            "--feature-gates",
            "TaintTolerationComparisonOperators=true",
        ],
        {},
        ExplainNode(
            "n1", None, ("--controllers=*,-out-of-service", "--feature-gates=TaintTolerationComparisonOperators=true")
        ),
    ),
    (
        "the controller's disruption-budget flags are passed on",
        [
            "explain",
            "node",
            "n1",
            "--respect-disruption-budgets-for-taints",
            "example.com/drain",
            "--disruption-budget-timeout=10m",
        ],
        {},
        ExplainNode(
            "n1", None, ("--respect-disruption-budgets-for-taints=example.com/drain", "--disruption-budget-timeout=10m")
        ),
    ),
]


@pytest.mark.parametrize(("argv", "environ", "expected"), [c[1:] for c in GOOD], ids=[c[0] for c in GOOD])
def test_the_plugin_accepts_explain_node_name(argv, environ, expected):
    assert parse_args(argv, environ) == expected


BAD = [
    ("nothing", [], "required: COMMAND"),
    ("no kind", ["explain"], "required: KIND"),
    ("no node name", ["explain", "node"], "required: NAME"),
    ("another kind", ["explain", "pod", "p"], "invalid choice: 'pod'"),
    ("another command", ["evict", "node", "n1"], "invalid choice: 'evict'"),
    ("two names", ["explain", "node", "n1", "n2"], "unrecognized arguments: n2"),
    ("an unknown flag", ["explain", "node", "n1", "--context", "c"], "unrecognized arguments"),
]


@pytest.mark.parametrize(("argv", "message"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_input_is_refused_with_one_line_and_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exited:
        parse_args(argv, {})
    assert exited.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kubectl taintkeeper: error:") and message in lines[0], lines


def test_the_plugin_runs_the_controllers_explain_command(monkeypatch):
    called = []
    monkeypatch.setattr("kubectl_taintkeeper.explain.main", lambda argv: called.append(argv) or 0)
    monkeypatch.setenv("KUBECONFIG", "/from/env")
    assert kubectl_plugin.main(["explain", "node", "n1"]) == 0
    assert called == [["--node", "n1", "--kubeconfig", "/from/env"]]


def console_scripts() -> dict[str, str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


def test_the_documented_console_scripts_are_declared():
    assert console_scripts() == {
        "taintkeeper-webhook": "webhook.__main__:main",
        "taintkeeper-controller": "controller.__main__:main",
        "taintkeeper-certs": "certs.__main__:main",
        "kubectl-taintkeeper": "kubectl_taintkeeper.plugin:main",
    }


@pytest.mark.parametrize("script", sorted(console_scripts()))
def test_each_console_script_is_installed_and_answers_help(script):
    path = Path(sys.executable).parent / script
    assert path.is_file(), f"{path} is missing: re-install the project (`make setup`) after changing pyproject.toml"
    result = subprocess.run([str(path), "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout
