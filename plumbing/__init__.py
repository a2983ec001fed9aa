"""What every process and command shares that is neither taint logic nor the Kubernetes API: its log
lines and its command line.

- `log_lines.py`: where a process's log lines go: the root logger's one handler (`LineHandler`, which
  can hold a batch of lines and write them together) and `configure_logging`;
- `log_formats.py`: the lines' formats, plain and JSON (`--log-format plain|json`), purely;
- `arguments.py`: the argument parser of every command, whose errors are one line on stderr and exit 2;
- `durations.py`: Go duration strings (`5s`, `1m30s`), as the flags and annotations take them.

It sits beside kube/ and above shared/ (pyproject's `layers` contract): it never talks to the
Kubernetes API. `python -m webhook` imports `arguments.py` and `log_formats.py` before gevent's
monkey-patching, so nothing here imports ssl, urllib3 or the Kubernetes client (the
`plumbing-loads-before-patching` contract).
"""
