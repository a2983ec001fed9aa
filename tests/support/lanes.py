"""`make test`'s sessions in two lanes side by side: the suites with real nodes one after another in one lane,
everything else beside them in the other.

Only one cluster with nodes runs on a host at a time (hack/lib/host.sh: one kube-proxy owns the host's KUBE-*
chains), so the node suites must follow each other; their time is mostly waiting (grace periods, leases,
tolerations counting down) on two cores that are mostly idle meanwhile. The suites without nodes (unit,
conformance, chart: CPU only, at a lower priority; integration: a control plane of its own, no host state)
run in the other lane during that wait. The old end (1.20) adds its sessions to the lane its suites belong
to. A lane stops at its first failing session; the other goes on; the run fails if either did.

    python -m tests.support.lanes [--old-end 1.20] [--old-end-tests "tests/integration tests/realnodes"]
        [--old-end-select EXPR] [--dry-run]

Each session's output goes to the terminal, each line behind its lane's name, and whole to
.local/test-logs/SESSION.log. With TAINTKEEPER_KUBERNETES set, every session runs that version and there
is no old-end pass (`TAINTKEEPER_KUBERNETES=1.20 make test`: every suite on 1.20).
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / ".local" / "test-logs"
NODES, APISERVER = "nodes", "apiserver"
# The suites that bring up a cluster with real nodes, or touch what one would (tests/image runs containerd
# and a runc shim root the host-restore test compares; tests/registry needs the image): in the nodes lane,
# in this order. Every other suite runs in the apiserver lane (tests/unit/support/test_lanes.py checks both).
NODE_SUITES = ("image", "registry", "realnodes", "e2e", "helm_release", "soak")
CPU_SUITES = ("unit", "conformance", "chart", "kind")  # no cluster: one session, niced
CONTROL_PLANE_SUITES = ("integration",)  # a control plane of their own, no nodes
ALL_SUITES = (*NODE_SUITES, *CPU_SUITES, *CONTROL_PLANE_SUITES)
DEFAULT_KUBERNETES = "1.37"


@dataclass(frozen=True)
class Session:
    name: str  # unique in the run: its record in the times table, its log's name
    suites: tuple[str, ...]
    kubernetes: str | None = None  # TAINTKEEPER_KUBERNETES for this session; None: the caller's
    select: tuple[str, ...] = ()  # pytest arguments beside the paths (the old end's -m)
    nice: int = 0

    def argv(self, python: str) -> list[str]:
        paths = [f"tests/{suite}" for suite in self.suites]
        command = [python, "-m", "pytest", "-p", "no:cacheprovider", *self.select, *paths]
        return ["nice", "-n", str(self.nice), *command] if self.nice else command


@dataclass
class Lane:
    name: str
    sessions: list[Session] = field(default_factory=list)


def lane_of(suite: str) -> str:
    return NODES if suite in NODE_SUITES else APISERVER


def suite_name(path: str) -> str:
    """tests/realnodes/ -> realnodes."""
    return path.strip("/").removeprefix("tests/")


def plan(kubernetes: str | None, old_end: str | None, old_end_tests: Sequence[str], old_end_select: str) -> list[Lane]:
    """The two lanes' sessions. `kubernetes`: the version asked for (no old end then); `old_end`: the version
    `old_end_tests` (tests/SUITE paths) run on again, with `old_end_select`."""
    version = kubernetes or DEFAULT_KUBERNETES
    nodes = Lane(NODES, [Session(f"{version}-nodes", NODE_SUITES)])
    apiserver = Lane(
        APISERVER,
        [
            Session(f"{version}-{'-'.join(CPU_SUITES)}", CPU_SUITES, nice=10),
            Session(f"{version}-{'-'.join(CONTROL_PLANE_SUITES)}", CONTROL_PLANE_SUITES),
        ],
    )
    if old_end and not kubernetes:
        suites = [suite_name(path) for path in old_end_tests]
        select = tuple(shlex.split(old_end_select))
        for lane in (nodes, apiserver):
            mine = tuple(suite for suite in suites if lane_of(suite) == lane.name)
            if mine:
                lane.sessions.append(Session(f"{old_end}-{'-'.join(mine)}", mine, kubernetes=old_end, select=select))
    return [nodes, apiserver]


def session_env(lane: Lane, session: Session, base: dict[str, str]) -> dict[str, str]:
    env = {**base, "TAINTKEEPER_TEST_LANE": lane.name, "TAINTKEEPER_TEST_SESSION": session.name}
    if session.kubernetes:
        env["TAINTKEEPER_KUBERNETES"] = session.kubernetes
    return env


@dataclass
class Runner:
    python: str
    logs: Path = LOGS
    out: IO[str] = sys.stdout
    failed: dict[str, str] = field(default_factory=dict)  # lane -> the session that failed
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _children: set[subprocess.Popen[str]] = field(default_factory=set)

    def argv_of(self, session: Session) -> list[str]:
        return session.argv(self.python)

    def say(self, lane: str, line: str) -> None:
        with self._lock:
            self.out.write(f"[{lane}] {line}")
            self.out.flush()

    def run_lane(self, lane: Lane, env: dict[str, str]) -> None:
        for session in lane.sessions:
            argv = self.argv_of(session)
            self.say(lane.name, f"session {session.name}: {shlex.join(argv)}\n")
            self.logs.mkdir(parents=True, exist_ok=True)
            with (self.logs / f"{session.name}.log").open("w") as log:
                child = subprocess.Popen(
                    argv,
                    cwd=ROOT,
                    env=session_env(lane, session, env),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                )
                with self._lock:
                    self._children.add(child)
                assert child.stdout is not None
                for line in child.stdout:
                    log.write(line)
                    self.say(lane.name, line)
                code = child.wait()
                with self._lock:
                    self._children.discard(child)
            if code != 0:
                self.failed[lane.name] = session.name
                self.say(lane.name, f"session {session.name} failed (exit {code}); the rest of this lane is skipped\n")
                return

    def run(self, lanes: list[Lane], env: dict[str, str]) -> int:
        threads = [threading.Thread(target=self.run_lane, args=(lane, env), name=lane.name) for lane in lanes]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                thread.join()
        except KeyboardInterrupt:  # pytest takes its clusters down on SIGINT, not on SIGKILL
            with self._lock:
                for child in self._children:
                    child.send_signal(signal.SIGINT)
            for thread in threads:
                thread.join()
            return 130
        for lane, session in sorted(self.failed.items()):
            self.out.write(f"lanes: {lane} failed in session {session} (log: {self.logs / session}.log)\n")
        return 1 if self.failed else 0


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.support.lanes", description=__doc__.splitlines()[0])
    parser.add_argument("--old-end", default="", help="the old Kubernetes version run again (empty: none)")
    parser.add_argument("--old-end-tests", default="tests/integration tests/realnodes")
    parser.add_argument("--old-end-select", default="", help="pytest arguments for the old end, e.g. -m EXPR")
    parser.add_argument("--dry-run", action="store_true", help="print each lane's sessions and run nothing")
    args = parser.parse_args(argv)
    unknown = [path for path in args.old_end_tests.split() if suite_name(path) not in ALL_SUITES]
    if unknown:
        parser.error(f"--old-end-tests: no suite {' '.join(unknown)} (one of: {' '.join(ALL_SUITES)}, as tests/NAME)")
    return args


def main(argv: list[str]) -> int:
    args = parse(argv)
    kubernetes = os.environ.get("TAINTKEEPER_KUBERNETES") or None
    lanes = plan(kubernetes, args.old_end or None, args.old_end_tests.split(), args.old_end_select)
    if args.dry_run:
        for lane in lanes:
            for session in lane.sessions:
                print(f"[{lane.name}] {session.name}: {shlex.join(session.argv(sys.executable))}")
        return 0
    return Runner(sys.executable).run(lanes, dict(os.environ))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
