"""Pure taint logic both processes use, the webhook and the controller.

- `defaults.py`: the default tolerations a pod misses, the skip label, per-namespace seconds (both);
- `taints.py`: taint identity, the NoExecute subset, condition taints (the controller; the webhook
  through defaults.py, which takes the failure taints' keys from it);
- `jsonlog.py`: the log line formats of both processes (`--log-format plain|json`); where the lines
  go, the handler and the logging setup, is plumbing/.

Everything here works on plain dicts shaped like Kubernetes API JSON (camelCase keys), does no
I/O, and imports neither `kubernetes` nor `flask` (pyproject's import contracts check it);
wherever time matters it takes `now`. What only the controller uses lives in controller/.
"""
