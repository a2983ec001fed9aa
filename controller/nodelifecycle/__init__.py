"""The node lifecycle controller (`nodelifecycle`, upstream NodeLifecycleController): node health,
Unknown conditions, NoSchedule condition taints and rate-limited per-zone NoExecute tainting."""
