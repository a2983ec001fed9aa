"""The chaos soak's checker: after a run, reads only kube-apiserver's audit log and the driver's fault
log, rebuilds every node's and pod's history from the audit records, and counts violations of the
invariants I1-I7 (never early, never late, never twice, one actor, healthy stays healthy,
admission, nothing lost), per fault kind.

    python -m bench.soak.check --audit DIR/logs/audit.log --faults FAULTS.jsonl [--builtin]

It never reads taintkeeper's own logs or metrics, so the same check judges kube-controller-manager
(`--builtin`) as the oracle.
"""
