"""`python -m controller [flags]`: run taintkeeper's controller (flags: controller/options.py).
`python -m controller explain --node NAME`: when and why each pod on a node will be evicted.
`python -m controller status [flags]`: zones, the brake, tainted nodes, pending evictions, the leader.
`python -m controller fence NODE [--min-down D] [--yes]` / `unfence NODE`: declare a dead node's machine off
(the out-of-service taint: its pods are force deleted), and take that back."""

from __future__ import annotations

import sys

from controller.options import OptionsError, build_parser, parse_options
from kube.client import ClientConfigError
from plumbing.log_lines import configure_logging


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "explain":
        from kubectl_taintkeeper.explain import main as explain_main

        return explain_main(args[1:])
    if args and args[0] == "status":
        from kubectl_taintkeeper.status_command import main as status_main

        return status_main(args[1:])
    if args and args[0] in ("fence", "unfence"):
        from kubectl_taintkeeper.fencing_command import main as fencing_main

        return fencing_main(args[0], args[1:])
    if args and args[0] in ("-h", "--help"):
        build_parser().print_help()
        return 0
    try:
        options = parse_options(args)
    except OptionsError as error:
        print(f"controller: error: {error}", file=sys.stderr)
        return 2
    configure_logging(options.log_format, options.log_level)

    from controller.runner import run

    try:
        return run(options)
    except ClientConfigError as error:
        print(f"controller: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
