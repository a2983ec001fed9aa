"""`kubectl taintkeeper status --watch` in a real terminal: tmux runs the command against the real
apiserver, the test reads the pane back (with its escape sequences) and changes the cluster under
it. On a terminal the frame is redrawn in place, in colour, and Ctrl-C ends it with status 0."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hack.wait import WaitTimeout
from tests.integration.kube import wait_for
from tests.integration.test_status_command import World, world  # noqa: F401  (the fixture)

ROOT = Path(__file__).resolve().parents[2]
ESCAPE = "\x1b["


EXITED = re.compile(r"\[exited (\d+)\]")

pytestmark = pytest.mark.version_independent(
    "the subject is the terminal (a frame redrawn in place, colour, Ctrl-C); each frame makes the one-shot "
    "command's reads, which test_status_command's request and report tests keep on 1.20"
)


class Pane:
    """One detached tmux session running one command, kept after the command exits. bash runs it and
    prints its exit status into the pane: tmux itself may mark the pane dead long before it reaps
    the process (seen here: a zombie left unreaped for 15 s), and bash waits out a Ctrl-C the
    command handles (a plain sh would die of the SIGINT itself)."""

    def __init__(self, command: list[str]) -> None:
        tmux = shutil.which("tmux")
        if tmux is None:
            pytest.fail("tmux is missing after `hack/local-cluster.sh deps` (Debian package tmux)", pytrace=False)
        self.tmux = tmux
        self.session = f"status-watch-{uuid.uuid4().hex[:8]}"
        reported = shlex.join(["bash", "-c", f'{shlex.join(command)}; echo "[exited $?]"'])
        self._tmux("new-session", "-d", "-s", self.session, "-x", "160", "-y", "60", "-c", str(ROOT), reported)
        self._tmux("set-option", "-t", self.session, "remain-on-exit", "on")

    def _tmux(self, *args: str) -> str:
        result = subprocess.run([self.tmux, *args], capture_output=True, text=True, timeout=30)
        assert result.returncode == 0, f"tmux {' '.join(args)}: {result.stderr}"
        return result.stdout

    def screen(self, escapes: bool = False) -> str:
        """What the pane shows now; with `escapes`, the colours as escape sequences too."""
        return self._tmux("capture-pane", "-p", "-t", self.session, *(["-e"] if escapes else []))

    def showing(self, *texts: str, absent: tuple[str, ...] = ()) -> str | None:
        """The screen, once it shows every one of `texts` and none of `absent`; else None."""
        screen = self.screen()
        return screen if all(t in screen for t in texts) and not any(t in screen for t in absent) else None

    def wait_showing(self, *texts: str, absent: tuple[str, ...] = (), timeout: float, what: str) -> str:
        try:
            return wait_for(lambda: self.showing(*texts, absent=absent), timeout, what)
        except WaitTimeout as error:
            raise AssertionError(f"{error}; the pane shows:\n{self.screen()}") from None

    def send(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", self.session, *keys)

    def exit_status(self) -> int | None:
        """The command's exit status once it has ended (as bash reported it in the pane), else None."""
        found = EXITED.search(self.screen())
        return int(found[1]) if found else None

    def close(self) -> None:
        subprocess.run([self.tmux, "kill-session", "-t", self.session], capture_output=True, timeout=30)


@pytest.fixture
def pane(world: World) -> Iterator[Pane]:  # noqa: F811  (the fixture imported above)
    world.scene()
    command = [
        "env",
        f"POD_NAME=status-{uuid.uuid4().hex}",
        sys.executable,
        "-m",
        "controller",
        "status",
        "-n",
        world.namespace,
        "--kubeconfig",
        str(world.local.kubeconfig),
        "--lease-namespace",
        world.lease_namespace,
        "--lease-name",
        world.lease_name,
        "--watch",
    ]
    opened = Pane(command)
    try:
        yield opened
    finally:
        opened.close()


def test_watch_redraws_in_place_in_colour_and_ctrl_c_ends_it(world: World, pane: Pane) -> None:  # noqa: F811
    first = pane.wait_showing(
        "PENDING EVICTIONS", "/db ", timeout=30, what="the first frame, with the pods due on the dead node"
    )
    assert "/web " in first and world.dead in first
    assert ESCAPE in pane.screen(escapes=True), "a terminal gets colour"

    world.core.delete_namespaced_pod("db", world.namespace, grace_period_seconds=0)
    redrawn = pane.wait_showing(
        "PENDING EVICTIONS", absent=("/db ",), timeout=15, what="a frame without the deleted pod"
    )
    assert "/web " in redrawn
    for heading in ("ZONES", "BRAKE", "TAINTED NODES", "PENDING EVICTIONS", "LEADER"):
        assert redrawn.count(heading) == 1, f"{heading}: one frame on the screen, drawn in place"

    pane.send("C-c")
    try:
        wait_for(lambda: pane.exit_status() is not None, 15, "the command to end on Ctrl-C")
    except WaitTimeout as error:
        raise AssertionError(f"{error}; the pane shows:\n{pane.screen()}") from None
    assert pane.exit_status() == 0
