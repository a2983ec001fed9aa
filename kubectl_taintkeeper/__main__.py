"""`python -m kubectl_taintkeeper status|explain|fence|unfence ...`: the kubectl plugin's commands."""

from __future__ import annotations

import sys

from kubectl_taintkeeper.plugin import main

if __name__ == "__main__":
    sys.exit(main())
