"""`make test`'s sessions in two lanes side by side: the suites with real nodes one after another in one lane,
everything else beside them in the other.

Only one cluster with nodes runs on a host at a time (hack/lib/host.sh: one kube-proxy owns the host's KUBE-*
chains), so the node suites must follow each other; their time is mostly waiting (grace periods, leases,
tolerations counting down) on two cores that are mostly idle meanwhile. The suites without nodes (unit,
conformance, chart: CPU only, at a lower priority; integration: a control plane of its own, no host state)
run in the other lane during that wait. The old end (1.20) adds its sessions to the lane its suites belong
to, and the end-to-end suite runs a second time on kind (TAINTKEEPER_E2E_PROVIDER=kind) after the 1.37 node
suites. A lane stops at its first failing session; the other goes on; the run fails if either did.

    python -m tests.support.lanes [--old-end 1.20] [--old-end-tests "tests/integration tests/realnodes"]
        [--old-end-select "-m EXPR"] [--dry-run]

The options default to TAINTKEEPER_OLD_END, TAINTKEEPER_OLD_END_TESTS and TAINTKEEPER_OLD_END_SELECT (how `make
test` passes them, unquoted). --old-end-tests takes suites (tests/NAME) or paths inside them
(tests/NAME/test_x.py, node ids): each goes to its suite's lane.

Each session's output goes to the terminal, each line behind its lane's name, and whole to
.local/test-logs/SESSION.log. With TAINTKEEPER_KUBERNETES set, every session runs that version and there
is no old-end pass (`TAINTKEEPER_KUBERNETES=1.20 make test`: every suite on 1.20).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
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
# and a runc shim root the host-restore test compares; tests/registry needs the image; tests/kind starts a
# Docker engine, whose iptables would cut real nodes off): in the nodes lane, in this order. Every other
# suite runs in the apiserver lane (tests/unit/support/test_lanes.py checks both).
NODE_SUITES = ("image", "registry", "kind", "realnodes", "e2e", "helm_release", "soak")
# kind's node image and the binaries it holds, built and checked without a cluster (their builds run in
# private mount namespaces, unseen by the host-restore test): first in the apiserver lane, so that a cold
# run's builds are done long before the nodes lane's kind session needs them.
BUILD_SUITES = ("kindnode",)
CPU_SUITES = ("unit", "conformance", "chart")  # no cluster: one session, niced
CONTROL_PLANE_SUITES = ("integration",)  # a control plane of their own, no nodes
ALL_SUITES = (*NODE_SUITES, *BUILD_SUITES, *CPU_SUITES, *CONTROL_PLANE_SUITES)
DEFAULT_KUBERNETES = "1.37"
KIND_KUBERNETES = ("1.37",)  # the versions kind v0.33 runs and the project builds a node image of (hack/lib/kind.sh)
# The apiserver lane yields the CPU to the nodes lane, whose suites judge timing on real kubelets (the soak's
# judge among them); the apiserver lane's own timing tests hold at this priority (they are measured so).
APISERVER_NICE = 10
NOTHING_COLLECTED = 5  # pytest's exit status when a selection (-k, -m) leaves a session nothing to run


@dataclass(frozen=True)
class Session:
    name: str  # unique in the run: its record in the times table, its log's name
    paths: tuple[str, ...]  # tests/SUITE, or paths and node ids inside suites
    kubernetes: str | None = None  # TAINTKEEPER_KUBERNETES for this session; None: the caller's
    select: tuple[str, ...] = ()  # pytest arguments beside the paths (the old end's -m)
    nice: int = 0
    env: tuple[tuple[str, str], ...] = ()  # more of the session's environment (the e2e suite's provider)

    def argv(self, python: str) -> list[str]:
        command = [python, "-m", "pytest", "-p", "no:cacheprovider", *self.select, *self.paths]
        return ["nice", "-n", str(self.nice), *command] if self.nice else command


@dataclass
class Lane:
    name: str
    sessions: list[Session] = field(default_factory=list)


def lane_of(suite: str) -> str:
    return NODES if suite in NODE_SUITES else APISERVER


def suite_name(path: str) -> str:
    """tests/realnodes/ -> realnodes; tests/integration/test_x.py::test_y -> integration."""
    return path.strip("/").removeprefix("tests/").split("/")[0].split("::")[0]


def suite_paths(suites: Sequence[str]) -> tuple[str, ...]:
    return tuple(f"tests/{suite}" for suite in suites)


def plan(kubernetes: str | None, old_end: str | None, old_end_tests: Sequence[str], old_end_select: str) -> list[Lane]:
    """The two lanes' sessions. `kubernetes`: the version asked for (no old end then); `old_end`: the version
    `old_end_tests` (tests/SUITE paths) run on again, with `old_end_select`."""
    version = kubernetes or DEFAULT_KUBERNETES
    nodes = Lane(NODES, [Session(f"{version}-nodes", suite_paths(NODE_SUITES))])
    if version in KIND_KUBERNETES:  # the deployed suite again, on kind (its provider is the session's)
        nodes.sessions.append(
            Session(f"{version}-e2e-kind", ("tests/e2e",), env=(("TAINTKEEPER_E2E_PROVIDER", "kind"),))
        )
    apiserver = Lane(
        APISERVER,
        [
            *(
                [Session(f"{version}-{'-'.join(BUILD_SUITES)}", suite_paths(BUILD_SUITES), nice=APISERVER_NICE)]
                if version in KIND_KUBERNETES
                else []
            ),
            Session(f"{version}-{'-'.join(CPU_SUITES)}", suite_paths(CPU_SUITES), nice=APISERVER_NICE),
            Session(
                f"{version}-{'-'.join(CONTROL_PLANE_SUITES)}", suite_paths(CONTROL_PLANE_SUITES), nice=APISERVER_NICE
            ),
        ],
    )
    if old_end and not kubernetes:
        select = tuple(shlex.split(old_end_select))
        for lane in (nodes, apiserver):
            mine = tuple(path for path in old_end_tests if lane_of(suite_name(path)) == lane.name)
            if mine:
                suites = "-".join(dict.fromkeys(suite_name(path) for path in mine))
                nice = APISERVER_NICE if lane is apiserver else 0
                lane.sessions.append(Session(f"{old_end}-{suites}", mine, old_end, select, nice))
    return [nodes, apiserver]


def session_env(lane: Lane, session: Session, base: dict[str, str]) -> dict[str, str]:
    env = {**base, "TAINTKEEPER_TEST_LANE": lane.name, "TAINTKEEPER_TEST_SESSION": session.name}
    env["PYTHONUNBUFFERED"] = "1"  # each line as it comes, not a pipe's buffer at a time
    if session.kubernetes:
        env["TAINTKEEPER_KUBERNETES"] = session.kubernetes
    env.update(session.env)
    return env


@dataclass
class Runner:
    python: str
    logs: Path = LOGS
    out: IO[str] = sys.stdout
    failed: dict[str, str] = field(default_factory=dict)  # lane -> the session that failed
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _children: set[subprocess.Popen[str]] = field(default_factory=set)
    _stopping: threading.Event = field(default_factory=threading.Event)

    def argv_of(self, session: Session) -> list[str]:
        return session.argv(self.python)

    def say(self, lane: str, line: str) -> None:
        with self._lock:
            self.out.write(f"[{lane}] {line}")
            self.out.flush()

    def run_lane(self, lane: Lane, env: dict[str, str]) -> None:
        """The lane's sessions in order, up to the first that fails; whatever goes wrong here fails the lane."""
        session = None
        try:
            for session in lane.sessions:
                code = self.run_session(lane, session, env)
                if code == NOTHING_COLLECTED:
                    self.say(lane.name, f"session {session.name}: no test selected\n")
                elif code != 0:
                    self.failed[lane.name] = session.name
                    self.say(
                        lane.name, f"session {session.name} failed (exit {code}); the rest of this lane is skipped\n"
                    )
                    return
        except BaseException as error:  # a lane that stops unseen must not pass the run
            self.failed[lane.name] = session.name if session else "(none)"
            self.say(lane.name, f"the lane stopped: {error!r}\n")

    def run_session(self, lane: Lane, session: Session, env: dict[str, str]) -> int:
        argv = self.argv_of(session)
        self.say(lane.name, f"session {session.name}: {shlex.join(argv)}\n")
        self.logs.mkdir(parents=True, exist_ok=True)
        with (self.logs / f"{session.name}.log").open("w") as log:
            with self._lock:
                if self._stopping.is_set():
                    raise KeyboardInterrupt
                # Its own session: a Ctrl-C reaches the runner only, which passes it on once (pytest takes its
                # clusters down on the first SIGINT; a second one would cut that short).
                child = subprocess.Popen(
                    argv,
                    cwd=ROOT,
                    env=session_env(lane, session, env),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    errors="replace",
                    start_new_session=True,
                )
                self._children.add(child)
            try:
                assert child.stdout is not None
                for line in child.stdout:
                    log.write(line)
                    self.say(lane.name, line if line.endswith("\n") else line + "\n")
                return child.wait()
            finally:
                if child.poll() is None:
                    child.kill()
                    child.wait()
                with self._lock:
                    self._children.discard(child)

    def run(self, lanes: list[Lane], env: dict[str, str]) -> int:
        threads = [threading.Thread(target=self.run_lane, args=(lane, env), name=lane.name) for lane in lanes]
        for thread in threads:
            thread.start()
        try:
            wait_for_all(threads)
        except KeyboardInterrupt:  # pytest takes its clusters down on SIGINT, not on SIGKILL
            with self._lock:
                self._stopping.set()
                for child in self._children:
                    child.send_signal(signal.SIGINT)
            wait_for_all(threads)
            return 130
        for lane, session in sorted(self.failed.items()):
            self.out.write(f"lanes: {lane} failed in session {session} (log: {self.logs / session}.log)\n")
        return 1 if self.failed else 0


def wait_for_all(threads: list[threading.Thread]) -> None:
    """Join each thread in short waits: a join without a timeout would hold off a Ctrl-C until the lanes end."""
    for thread in threads:
        while thread.is_alive():
            thread.join(0.2)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.support.lanes", description=__doc__.splitlines()[0])
    env = os.environ.get
    parser.add_argument("--old-end", default=env("TAINTKEEPER_OLD_END", ""), help="the old version run again")
    parser.add_argument(
        "--old-end-tests", default=env("TAINTKEEPER_OLD_END_TESTS", "tests/integration tests/realnodes")
    )
    parser.add_argument("--old-end-select", default=env("TAINTKEEPER_OLD_END_SELECT", ""), help="e.g. -m EXPR")
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
                settings = [f"{key}={value}" for key, value in session.env]
                print(f"[{lane.name}] {session.name}: {shlex.join([*settings, *session.argv(sys.executable)])}")
        return 0
    shutil.rmtree(LOGS, ignore_errors=True)  # no log of an earlier run beside this one's
    # Started in the background (nohup, a CI job) a process has SIGINT ignored, and its children inherit that:
    # then a Ctrl-C passed on would not reach pytest. With a handler here, the children start with the default.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    return Runner(sys.executable).run(lanes, dict(os.environ))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
