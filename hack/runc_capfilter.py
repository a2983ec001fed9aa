#!/usr/bin/env python3
"""runc, less the capabilities this host cannot grant: the runtime the project's Docker engine runs
containers with where the host's capability bounding set lacks one the kernel has (hack/lib/docker.sh).

Docker 20.10 gives a `--privileged` container every capability the kernel knows, not those its own
bounding set holds (moby/moby#42906), and runc then fails to set a bounding set wider than its own
("unable to apply caps: operation not permitted"). kind starts every node with `--privileged`. Registered
with `dockerd --add-runtime`, this program is called exactly as runc is (containerd's shim passes the
same arguments); for `create`, `run` and `exec` it removes from the container's or the process's
capability sets each capability missing from its own bounding set, then runs runc with the arguments
untouched. Every other command goes to runc as it is.

    runc_capfilter.py missing      print the capabilities the kernel has and this process may not
                                   hold (empty: runc needs no help here)
    runc_capfilter.py RUNC-ARGS    as runc (RUNC_CAPFILTER_RUNC: the runc to run; default /usr/sbin/runc)

Only the standard library: it runs under the system's python3, as dockerd's child.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

# include/uapi/linux/capability.h
CAPABILITIES = (
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
)
CAPABILITY_SETS = ("bounding", "effective", "inheritable", "permitted", "ambient")
# runc's global options that take a value (`runc --help`): the command is the first word after them.
GLOBAL_OPTIONS_WITH_VALUE = frozenset({"--root", "--log", "--log-format", "--criu", "--rootless"})
DEFAULT_RUNC = "/usr/sbin/runc"


def missing_capabilities(bounding: int, last_cap: int) -> list[str]:
    """The capabilities the kernel knows (0..last_cap) whose bit is clear in `bounding`."""
    return [name for bit, name in enumerate(CAPABILITIES[: last_cap + 1]) if not bounding >> bit & 1]


def own_missing_capabilities() -> list[str]:
    status = Path("/proc/self/status").read_text()
    bounding = next(int(line.split()[1], 16) for line in status.splitlines() if line.startswith("CapBnd:"))
    last_cap = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    return missing_capabilities(bounding, last_cap)


def without(capabilities: dict[str, Any], missing: frozenset[str]) -> dict[str, Any]:
    """An OCI `capabilities` object with every name in `missing` removed from each set."""
    return {
        key: [name for name in value if name not in missing] if key in CAPABILITY_SETS else value
        for key, value in capabilities.items()
    }


def filter_spec(document: dict[str, Any], missing: frozenset[str], *, process: bool) -> dict[str, Any]:
    """A bundle's config.json (`process`: False) or an exec's process.json (True), its capabilities filtered."""
    result = dict(document)
    if process:
        if isinstance(result.get("capabilities"), dict):
            result["capabilities"] = without(result["capabilities"], missing)
        return result
    if isinstance(result.get("process"), dict) and isinstance(result["process"].get("capabilities"), dict):
        result["process"] = {**result["process"], "capabilities": without(result["process"]["capabilities"], missing)}
    return result


def command_of(args: list[str]) -> tuple[str | None, list[str]]:
    """runc's command (create, exec, ...) and the arguments after it."""
    index = 0
    while index < len(args):
        arg = args[index]
        if not arg.startswith("-"):
            return arg, args[index + 1 :]
        index += 2 if arg in GLOBAL_OPTIONS_WITH_VALUE else 1
    return None, []


def option_value(args: list[str], names: tuple[str, ...]) -> str | None:
    """The value of the first of `names` given, as `--name value` or `--name=value`."""
    for index, arg in enumerate(args):
        for name in names:
            if arg == name and index + 1 < len(args):
                return args[index + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def spec_to_filter(args: list[str]) -> tuple[Path, bool] | None:
    """The JSON file a runc call reads its capabilities from, and whether it is a process spec; None: none."""
    command, rest = command_of(args)
    if command in ("create", "run"):
        return Path(option_value(rest, ("--bundle", "-b")) or ".") / "config.json", False
    if command == "exec":
        process = option_value(rest, ("--process", "-p"))
        return (Path(process), True) if process else None
    return None


def drop_cap_options(args: list[str], missing: frozenset[str]) -> list[str]:
    """`runc exec --cap NAME` for a missing capability: left out, as the spec's are."""
    result: list[str] = []
    skip = False
    for index, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg in ("--cap", "-c") and index + 1 < len(args) and args[index + 1] in missing:
            skip = True
            continue
        if arg.startswith("--cap=") and arg.split("=", 1)[1] in missing:
            continue
        result.append(arg)
    return result


def main(argv: list[str]) -> int:
    if argv == ["missing"]:
        print(" ".join(own_missing_capabilities()))
        return 0
    missing = frozenset(own_missing_capabilities())
    args = argv
    if missing:
        target = spec_to_filter(args)
        if target is not None and target[0].is_file():
            path, process = target
            path.write_text(json.dumps(filter_spec(json.loads(path.read_text()), missing, process=process)))
        if command_of(args)[0] == "exec":
            args = drop_cap_options(args, missing)
    runc = os.environ.get("RUNC_CAPFILTER_RUNC") or (
        DEFAULT_RUNC if Path(DEFAULT_RUNC).exists() else shutil.which("runc")
    )
    if not runc:
        print("runc_capfilter: no runc to run (install runc or set RUNC_CAPFILTER_RUNC)", file=sys.stderr)
        return 127
    os.execv(runc, [runc, *args])
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
