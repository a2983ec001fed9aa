"""hack/runc_capfilter.py: runc less the capabilities the host cannot grant, as the project's Docker engine
runs kind's privileged nodes on a host whose bounding set lacks one (hack/lib/docker.sh)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hack import runc_capfilter
from hack.runc_capfilter import command_of, drop_cap_options, filter_spec, missing_capabilities, spec_to_filter

EVERY = (1 << 41) - 1
WITHOUT_SYS_RESOURCE = 0x000001FFFEFFFFFF  # this project's CI machine: `grep CapBnd /proc/self/status`

MISSING = [
    ("a host that may grant every capability the kernel knows", EVERY, 40, []),
    ("a host without CAP_SYS_RESOURCE (bit 24)", WITHOUT_SYS_RESOURCE, 40, ["CAP_SYS_RESOURCE"]),
    ("bits past the kernel's last capability are not missing", (1 << 38) - 1, 37, []),
    ("two missing, named in bit order", EVERY & ~(1 << 21) & ~(1 << 12), 40, ["CAP_NET_ADMIN", "CAP_SYS_ADMIN"]),
]


@pytest.mark.parametrize(("bounding", "last_cap", "expected"), [r[1:] for r in MISSING], ids=[r[0] for r in MISSING])
def test_missing_capabilities_are_those_the_kernel_has_and_the_bounding_set_lacks(
    bounding: int, last_cap: int, expected: list[str]
):
    assert missing_capabilities(bounding, last_cap) == expected


def test_the_table_names_every_capability_up_to_checkpoint_restore_in_kernel_order():
    assert len(runc_capfilter.CAPABILITIES) == 41
    assert runc_capfilter.CAPABILITIES[24] == "CAP_SYS_RESOURCE"
    assert runc_capfilter.CAPABILITIES[40] == "CAP_CHECKPOINT_RESTORE"


PRIVILEGED = ["CAP_CHOWN", "CAP_SYS_ADMIN", "CAP_SYS_RESOURCE"]
SETS = {name: list(PRIVILEGED) for name in ("bounding", "effective", "inheritable", "permitted", "ambient")}
KEPT = ["CAP_CHOWN", "CAP_SYS_ADMIN"]

FILTERS: list[tuple[str, dict[str, Any], bool, dict[str, Any]]] = [
    (
        "a privileged container's config loses the missing one from every set, nothing else changes",
        {"ociVersion": "1.0.2", "process": {"args": ["/sbin/init"], "capabilities": SETS}, "root": {"path": "rootfs"}},
        False,
        {
            "ociVersion": "1.0.2",
            "process": {"args": ["/sbin/init"], "capabilities": dict.fromkeys(SETS, KEPT)},
            "root": {"path": "rootfs"},
        },
    ),
    (
        "an exec's process spec loses it too",
        {"args": ["kubeadm", "init"], "capabilities": SETS},
        True,
        {"args": ["kubeadm", "init"], "capabilities": dict.fromkeys(SETS, KEPT)},
    ),
    (
        "a config without capabilities is left as it is",
        {"process": {"args": ["true"]}},
        False,
        {"process": {"args": ["true"]}},
    ),
    (
        "only the five sets are filtered",
        {"capabilities": {"bounding": PRIVILEGED, "comment": ["CAP_SYS_RESOURCE"]}},
        True,
        {"capabilities": {"bounding": KEPT, "comment": ["CAP_SYS_RESOURCE"]}},
    ),
]


@pytest.mark.parametrize(("document", "process", "expected"), [r[1:] for r in FILTERS], ids=[r[0] for r in FILTERS])
def test_filter_spec(document: dict[str, Any], process: bool, expected: dict[str, Any]):
    assert filter_spec(document, frozenset({"CAP_SYS_RESOURCE"}), process=process) == expected


# As containerd's runc shim (v2) calls its runtime binary.
ROOT = ["--root", "/run/containerd/runc/moby", "--log", "/run/x/log.json", "--log-format", "json"]
CALLS: list[tuple[str, list[str], tuple[str, bool] | None]] = [
    (
        "create reads the bundle's config.json",
        [*ROOT, "--systemd-cgroup", "create", "--bundle", "/b/1", "--pid-file", "/b/1/init.pid", "c1"],
        ("/b/1/config.json", False),
    ),
    ("run with -b=", ["run", "-b=/b/2", "c2"], ("/b/2/config.json", False)),
    ("create without --bundle reads the working directory's", ["create", "c3"], ("config.json", False)),
    (
        "exec reads its --process file",
        [*ROOT, "exec", "--process", "/tmp/runc-process1", "--detach", "--pid-file", "/p", "c1"],
        ("/tmp/runc-process1", True),
    ),
    ("exec with -p", ["exec", "-p", "/tmp/p2", "c1"], ("/tmp/p2", True)),
    ("exec of a command line has no spec", ["exec", "c1", "sh"], None),
    ("start, delete, state, kill pass through", [*ROOT, "delete", "--force", "c1"], None),
    ("a global option's value is not the command", ["--root", "create", "state", "c1"], None),
]


@pytest.mark.parametrize(("args", "expected"), [r[1:] for r in CALLS], ids=[r[0] for r in CALLS])
def test_spec_to_filter_follows_runcs_command_line(args: list[str], expected: tuple[str, bool] | None):
    found = spec_to_filter(args)
    assert (None if found is None else (str(found[0]), found[1])) == expected


def test_no_command_at_all():
    assert command_of(["--debug"]) == (None, [])


DROPS = [
    ("--cap NAME of a missing one", ["exec", "--cap", "CAP_SYS_RESOURCE", "c1"], ["exec", "c1"]),
    ("--cap=NAME and -c NAME", ["exec", "--cap=CAP_SYS_RESOURCE", "-c", "CAP_SYS_RESOURCE", "c1"], ["exec", "c1"]),
    ("a cap the host grants stays", ["exec", "--cap", "CAP_NET_ADMIN", "c1"], ["exec", "--cap", "CAP_NET_ADMIN", "c1"]),
]


@pytest.mark.parametrize(("args", "expected"), [r[1:] for r in DROPS], ids=[r[0] for r in DROPS])
def test_exec_cap_options_of_missing_capabilities_are_left_out(args: list[str], expected: list[str]):
    assert drop_cap_options(args, frozenset({"CAP_SYS_RESOURCE"})) == expected


class Exec(Exception):
    """os.execv, caught: the program it would have become."""


def _run(monkeypatch: pytest.MonkeyPatch, argv: list[str], missing: list[str]) -> list[str]:
    monkeypatch.setattr(runc_capfilter, "own_missing_capabilities", lambda: missing)
    monkeypatch.setenv("RUNC_CAPFILTER_RUNC", "/opt/real/runc")

    def execv(path: str, args: list[str]) -> None:
        raise Exec([path, *args])

    monkeypatch.setattr(runc_capfilter.os, "execv", execv)
    with pytest.raises(Exec) as became:
        runc_capfilter.main(argv)
    result: list[str] = became.value.args[0]
    return result


def test_a_create_filters_the_bundle_in_place_then_runs_runc_with_the_arguments_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    (tmp_path / "config.json").write_text(json.dumps({"process": {"capabilities": SETS}}))
    argv = [*ROOT, "create", "--bundle", str(tmp_path), "c1"]
    assert _run(monkeypatch, argv, ["CAP_SYS_RESOURCE"]) == ["/opt/real/runc", "/opt/real/runc", *argv]
    assert json.loads((tmp_path / "config.json").read_text())["process"]["capabilities"] == dict.fromkeys(SETS, KEPT)


def test_on_a_host_missing_nothing_the_bundle_is_not_touched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    text = json.dumps({"process": {"capabilities": SETS}}, indent=3)
    (tmp_path / "config.json").write_text(text)
    _run(monkeypatch, ["create", "--bundle", str(tmp_path), "c1"], [])
    assert (tmp_path / "config.json").read_text() == text


def test_this_hosts_missing_capabilities_are_read_from_its_own_status():
    status = Path("/proc/self/status").read_text()
    bounding = int(next(line for line in status.splitlines() if line.startswith("CapBnd:")).split()[1], 16)
    last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    assert runc_capfilter.own_missing_capabilities() == missing_capabilities(bounding, last)
