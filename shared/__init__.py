"""The taint and toleration logic both processes, the webhook and the controller, must compute alike.

- `defaults.py`: the default tolerations a pod misses, the skip label, per-namespace seconds (both);
- `taints.py`: taint identity, the NoExecute subset, condition taints (the controller; the webhook
  through defaults.py, which takes the failure taints' keys from it).

Only that belongs here: every module is imported by both webhook/ and controller/, directly or through
another module (tests/unit/shared/test_both_processes.py checks it). What one process alone uses lives
in its package; what every process and command shares that is not taint logic (log line formats, Go
durations) is in plumbing/, and what concerns the Kubernetes API (the apiserver's clock) in kube/.

Everything here works on plain dicts shaped like Kubernetes API JSON (camelCase keys), does no
I/O, and imports neither `kubernetes` nor `flask` (pyproject's import contracts check it);
wherever time matters it takes `now`.
"""
