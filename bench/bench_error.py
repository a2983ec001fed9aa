"""The error the webhook benchmark (bench/webhook_bench.py) stops with when it cannot produce honest figures."""


class BenchError(RuntimeError):
    """The benchmark cannot produce honest figures; the message says why."""
