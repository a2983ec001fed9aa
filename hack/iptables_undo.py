#!/usr/bin/env python3
"""What undoes a Docker engine's iptables changes: `iptables-save` now against `iptables-save` before it
started (hack/lib/docker.sh records one at `docker-up` and undoes the rest at `docker-down`).

    iptables_undo.py rules BASELINE < CURRENT      an `iptables-restore --noflush` script: each rule not
                                                   in the baseline deleted, each user chain not in it
                                                   flushed and deleted (rules inside such chains go with
                                                   them); a table it did not have is left empty
    iptables_undo.py policies BASELINE < CURRENT   "TABLE CHAIN POLICY" for each built-in chain whose
                                                   policy differs from the baseline's (dockerd sets
                                                   FORWARD to DROP when it turns forwarding on)

Counters are ignored; a rule present twice now and once before is deleted once. Only the standard
library: it runs under the system's python3.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Table:
    chains: dict[str, str] = field(default_factory=dict)  # name -> policy ("-" for a user chain)
    rules: list[str] = field(default_factory=list)  # "-A CHAIN ..." as iptables-save prints them


def parse(saved: str) -> dict[str, Table]:
    tables: dict[str, Table] = {}
    table: Table | None = None
    for line in saved.splitlines():
        if line.startswith("*"):
            table = tables.setdefault(line[1:].strip(), Table())
        elif table is not None and line.startswith(":"):
            name, policy = line[1:].split()[:2]
            table.chains[name] = policy
        elif table is not None and line.startswith("-A "):
            table.rules.append(line.strip())
    return tables


def rules_script(baseline: str, current: str) -> str:
    before, now = parse(baseline), parse(current)
    script: list[str] = []
    for name, table in now.items():
        old = before.get(name, Table())
        new_chains = [chain for chain, policy in table.chains.items() if policy == "-" and chain not in old.chains]
        extra = Counter(table.rules) - Counter(old.rules)
        deletions = []
        for rule in table.rules:
            if extra[rule] > 0 and rule.split()[1] not in new_chains:  # a new chain's rules go with it
                deletions.append("-D " + rule[3:])
                extra[rule] -= 1
        if not deletions and not new_chains:
            continue
        script += [f"*{name}", *deletions]
        script += [f"-F {chain}" for chain in new_chains] + [f"-X {chain}" for chain in new_chains]
        script.append("COMMIT")
    return "\n".join(script) + ("\n" if script else "")


def changed_policies(baseline: str, current: str) -> list[tuple[str, str, str]]:
    """(table, chain, the baseline's policy) for each built-in chain whose policy changed."""
    before, now = parse(baseline), parse(current)
    return [
        (name, chain, before[name].chains[chain])
        for name, table in now.items()
        for chain, policy in table.chains.items()
        if policy != "-" and name in before and before[name].chains.get(chain, policy) != policy
    ]


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("rules", "policies"):
        print("usage: iptables_undo.py rules|policies BASELINE < CURRENT", file=sys.stderr)
        return 2
    baseline, current = Path(argv[1]).read_text(), sys.stdin.read()
    if argv[0] == "rules":
        sys.stdout.write(rules_script(baseline, current))
    else:
        for table, chain, policy in changed_policies(baseline, current):
            print(table, chain, policy)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
