"""What every process and command shares that touches its own streams.

- `log_lines.py`: where a process's log lines go: the root logger's one handler (`LineHandler`, which
  can hold a batch of lines and write them together) and `configure_logging`; the lines' formats are
  pure, in shared/jsonlog.py;
- `arguments.py`: the argument parser of every command, whose errors are one line on stderr and exit 2.

It sits beside kube/ and above shared/ (pyproject's `layers` contract): it never talks to the
Kubernetes API, and shared/ stays free of I/O. `python -m webhook` imports `arguments.py` before
gevent's monkey-patching, so nothing here imports ssl, urllib3 or the Kubernetes client.
"""
