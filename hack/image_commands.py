"""What every step of the image build shares: BuildError, the `image:` log line, and run(), a command
whose failure is a BuildError."""

from __future__ import annotations

import subprocess
import sys


class BuildError(Exception):
    """A step of the build failed."""


def log(message: str) -> None:
    print(f"image: {message}", file=sys.stderr, flush=True)


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        raise BuildError(f"{' '.join(cmd[:6])}... failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return result
