"""The webhook's fast paths: every place it relies on its libraries' internals, to skip work they redo
on every request for the same result, behind one switch.

`--fast-paths` (TAINTKEEPER_FAST_PATHS, default true). With the switch on, each fast path checks, the
first time a process chooses them (`FastPaths(switch=True)`), that the internal it relies on still
has the shape it expects; where one does not, that fast path alone is off, the library's plain public
path is taken instead, and the webhook's start logs one line naming it and why (`off_lines`, logged
by gunicorn_conf.py). With the switch off, nothing here touches a library's internals. Either way
the webhook answers the same: responses, headers, metric values and log lines (the tests run it both
ways). The switch also chooses the gevent worker (gunicorn_conf.py): the webhook's own, whose
reliance on gunicorn's internals webhook/worker.py checks at start, or gunicorn's.

Each fast path, what it relies on, and what it saves:

- gunicorn-settings: `gunicorn.config.Config.__getattr__`, which resolves a setting on every read.
  Each setting is read once per worker instead of at each of its many reads per request.
- gunicorn-http-date: `gunicorn.util.http_date(timestamp=None)`, which the response reads through its
  module. The Date header is formatted once per second instead of per response.
- gunicorn-base-environ: `gunicorn.http.wsgi.base_environ(cfg)`, which `default_environ` reads through
  its module. The environ's constant part is made once per worker instead of per request (with a
  walk of the error log's handlers).
- gunicorn-peer-trust: `Request._peer_is_trusted_proxy(self)` and `RequestParser.mesg_class`. Whether a
  peer may set forwarding headers is decided once per IP instead of parsing the IP per request.
- werkzeug-response: `Response.__new__` and `Headers._list`. A JSON answer is made directly, without
  werkzeug's constructor checks.
- prometheus-histogram-batch: Histogram's `_upper_bounds`, `_buckets`, `_sum` and
  `_raise_if_not_observable`. A batch's observations update each bucket and the sum once, instead of
  a sum and a bucket update per review.
- logging-record-template: `LogRecord.__new__`, and a record's attributes all in its `__dict__`. What
  depends only on the process and the thread is copied from a record made once per thread instead of
  looked up for every record.
- logging-caller-lookup: `logging._srcfile`, which `Logger._log` reads. No record walks the stack for
  its caller's file and line, which no format here or in gunicorn prints.

gunicorn-base-environ and gunicorn-peer-trust keep what they remember on the settled settings, so they
are off whenever gunicorn-settings is.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import threading
import time
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from flask import Response
from gunicorn import http, util
from gunicorn.config import Config
from gunicorn.http import wsgi
from gunicorn.http.message import Request
from gunicorn.http.parser import RequestParser
from werkzeug.datastructures import Headers

from webhook import codec

GUNICORN_SETTINGS = "gunicorn-settings"
HTTP_DATE = "gunicorn-http-date"
BASE_ENVIRON = "gunicorn-base-environ"
PEER_TRUST = "gunicorn-peer-trust"
WERKZEUG_RESPONSE = "werkzeug-response"
HISTOGRAM_BATCH = "prometheus-histogram-batch"
LOG_RECORD_TEMPLATE = "logging-record-template"
CALLER_LOOKUP = "logging-caller-lookup"

# The record a log line makes: (logger, created, msecs, level, message, args, extra) -> LogRecord.
RecordMaker = Callable[
    [logging.Logger, float, float, int, str, tuple[object, ...], Mapping[str, object]], logging.LogRecord
]


# --- the plain public paths, taken with the switch off or where a fast path's check failed --------------------


def json_response(data: bytes, status: int) -> Response:
    """`data` answered with `status` as JSON, the way werkzeug makes a response."""
    return Response(data, status=status, content_type=codec.CONTENT_TYPE)


def observe_each(histogram: Any, values: list[float]) -> None:
    """`histogram.observe(value)` for each value."""
    for value in values:
        histogram.observe(value)


def record_made_by_logging(
    logger: logging.Logger,
    created: float,
    msecs: float,
    level: int,
    message: str,
    args: tuple[object, ...],
    extra: Mapping[str, object],
) -> logging.LogRecord:
    """`logger.makeRecord`'s record (from the record factory, `extra` checked), moved to `created`."""
    record = logger.makeRecord(logger.name, level, "(unknown file)", 0, message, args, None, extra=extra or None)
    record.relativeCreated -= (record.created - created) * 1000
    record.created = created
    record.msecs = msecs
    return record


# --- which fast paths a process takes --------------------------------------------------------------------------


class FastPaths:
    """The fast paths this process takes: none with the switch off; with it on, each whose check passed.

    What differs between the two ways is chosen here, once: `json_response`, `observe_all` and
    `make_record` are the fast functions or the plain ones above; `settled`, `install_in_gunicorn`,
    `request_parser` and `skip_caller_lookup` do gunicorn's and logging's part.
    """

    def __init__(self, switch: bool) -> None:
        self.switch = switch
        # fast path -> why it is off though the switch is on; no check runs with the switch off
        self.off: dict[str, str] = {}
        if switch:
            self.off = {name: why for name in CHECKS if (why := _why_off(name)) is not None}
        self.json_response: Callable[[bytes, int], Response] = (
            _json_response_made_directly if self.takes(WERKZEUG_RESPONSE) else json_response
        )
        self.observe_all: Callable[[Any, list[float]], None] = (
            _observe_all_at_once if self.takes(HISTOGRAM_BATCH) else observe_each
        )
        self.make_record: RecordMaker = (
            _record_from_template if self.takes(LOG_RECORD_TEMPLATE) else record_made_by_logging
        )

    def takes(self, name: str) -> bool:
        return self.switch and name not in self.off

    def off_lines(self) -> list[str]:
        """One line per fast path that is off though the switch is on, saying why."""
        return [f"fast path {name} is off: {why}; the library's plain path is taken" for name, why in self.off.items()]

    def settled(self, cfg: Any) -> Any:
        """A worker's gunicorn settings: each read once (gunicorn-settings), else gunicorn's own."""
        return _SettledConfig(cfg) if self.takes(GUNICORN_SETTINGS) else cfg

    def install_in_gunicorn(self) -> None:
        """Put the fast `util.http_date` and `wsgi.base_environ` in gunicorn's modules, for this process
        (a worker): gunicorn reads both through their modules on every request."""
        if self.takes(HTTP_DATE) and not hasattr(util.http_date, "__wrapped__"):
            util.http_date = http_date_once_per_second(util.http_date)
        if self.takes(BASE_ENVIRON) and not hasattr(wsgi.base_environ, "__wrapped__"):
            wsgi.base_environ = base_environ_once_per_worker(wsgi.base_environ)

    def request_parser(self, cfg: Any, client: Any, addr: Any) -> Any:
        """gunicorn's parser of a connection's requests; for HTTP/1, one whose requests remember each
        peer's trust (gunicorn-peer-trust)."""
        if self.takes(PEER_TRUST) and getattr(cfg, "protocol", "http") == "http":
            return _RequestParser(cfg, client, addr)
        return http.get_parser(cfg, client, addr)

    def skip_caller_lookup(self) -> None:
        """Records no longer look up their caller's file and line (no format here or in gunicorn prints
        them), for this process and those it forks."""
        if self.takes(CALLER_LOOKUP):
            logging._srcfile = None


def forget_environ(cfg: Any) -> None:
    """Make the environ's constant part again on the next request (after the worker reopened its log
    files, which its `wsgi.errors` writes to)."""
    if isinstance(cfg, _SettledConfig):
        cfg.environ_base.clear()


# --- gunicorn -----------------------------------------------------------------------------------------------


class _SettledConfig:
    """The worker's gunicorn settings, each looked up once. gunicorn's `Config` resolves every `cfg.name`
    through `__getattr__` and the setting's `get()`, many times per request; a worker's settings do
    not change (a reload starts new workers). It also keeps what follows from the settings alone: which
    peers may set forwarding headers, and the constant part of every WSGI environ."""

    def __init__(self, cfg: Any) -> None:
        self.__dict__["_cfg"] = cfg
        self.__dict__["trusted_peers"] = {}  # peer IP -> whether forwarded_allow_ips trusts it
        self.__dict__["environ_base"] = {}  # wsgi.base_environ's answer; empty until first made

    def __getattr__(self, name: str) -> Any:
        value = self.__dict__[name] = getattr(self._cfg, name)
        return value


TRUSTED_PEERS_KEPT = 1024


class _Request(Request):
    """gunicorn's request, with whether the peer may set forwarding headers decided once per peer IP
    (gunicorn parses the peer's IP and tests it against `forwarded_allow_ips` on every request)."""

    def _peer_is_trusted_proxy(self) -> bool:
        peer = self.peer_addr
        known = self.cfg.trusted_peers if isinstance(self.cfg, _SettledConfig) else None
        if known is None or not isinstance(peer, tuple):
            return bool(super()._peer_is_trusted_proxy())
        trusted = known.get(peer[0])
        if trusted is None:
            if len(known) >= TRUSTED_PEERS_KEPT:
                known.clear()
            trusted = known[peer[0]] = bool(super()._peer_is_trusted_proxy())
        return trusted


class _RequestParser(RequestParser):
    mesg_class = _Request


def http_date_once_per_second(gunicorns: Callable[..., str]) -> Callable[..., str]:
    """gunicorn's `util.http_date` (`gunicorns`), the current time's formatted once per second
    (`email.utils.formatdate` on every response)."""
    latest: tuple[int, str] = (-1, "")  # (whole second, its HTTP date): one tuple, so readers see a consistent pair

    @functools.wraps(gunicorns)
    def http_date(timestamp: float | None = None) -> str:
        nonlocal latest
        if timestamp is not None:
            return gunicorns(timestamp)
        second = int(time.time())
        cached, text = latest
        if second != cached:
            text = gunicorns(second)
            latest = (second, text)
        return text

    return http_date


def base_environ_once_per_worker(gunicorns: Callable[[Any], dict[str, Any]]) -> Callable[[Any], dict[str, Any]]:
    """gunicorn's `wsgi.base_environ` (`gunicorns`), made once per worker's settings and copied (it looked
    up gunicorn's error logger and walked its handlers for every request); made again after
    `forget_environ`."""

    @functools.wraps(gunicorns)
    def base_environ(cfg: Any) -> dict[str, Any]:
        if not isinstance(cfg, _SettledConfig):
            return gunicorns(cfg)
        if not cfg.environ_base:
            cfg.environ_base.update(gunicorns(cfg))
        return dict(cfg.environ_base)

    return base_environ


def _parameters(function: object) -> list[str] | None:
    try:
        return list(inspect.signature(function).parameters)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _check_gunicorn_settings() -> str | None:
    if not callable(vars(Config).get("__getattr__")):
        return "gunicorn.config.Config no longer resolves its settings in __getattr__"
    return None


def _check_function(module: Any, where: str, name: str, parameters: str) -> str | None:
    """`module.name` is a function taking exactly `parameters` (as written: "timestamp=None")."""
    function = getattr(module, name, None)
    if not callable(function):
        return f"{where} has no {name}"
    wanted = [parameter.split("=")[0] for parameter in parameters.split(", ")]
    if _parameters(function) != wanted:
        return f"{where}.{name} takes {_parameters(function)}, not ({parameters})"
    return None


def code_names(function: Any) -> tuple[str, ...]:
    """The global and attribute names a function's code reads (it looks them up at each call)."""
    return getattr(getattr(function, "__code__", None), "co_names", ())


def _check_http_date() -> str | None:
    wrong = _check_function(util, "gunicorn.util", "http_date", "timestamp=None")
    if wrong:
        return wrong
    default_headers = getattr(getattr(wsgi, "Response", None), "default_headers", None)
    if getattr(wsgi, "util", None) is not util or "http_date" not in code_names(default_headers):
        return "gunicorn's Response.default_headers no longer reads util.http_date through its module"
    return None


def _check_base_environ() -> str | None:
    wrong = _check_function(wsgi, "gunicorn.http.wsgi", "base_environ", "cfg")
    if wrong:
        return wrong
    if "base_environ" not in code_names(getattr(wsgi, "default_environ", None)):
        return "gunicorn.http.wsgi.default_environ no longer reads base_environ through its module"
    return None


def _check_peer_trust() -> str | None:
    method = getattr(Request, "_peer_is_trusted_proxy", None)
    if not callable(method):
        return "gunicorn's Request has no _peer_is_trusted_proxy"
    if _parameters(method) != ["self"]:
        return f"gunicorn's Request._peer_is_trusted_proxy takes {_parameters(method)}, not (self)"
    if getattr(RequestParser, "mesg_class", None) is not Request:
        return "gunicorn's RequestParser no longer makes its requests from mesg_class"
    return None


# --- werkzeug -----------------------------------------------------------------------------------------------

_STATUS_LINES = {status: Response(status=status).status for status in (200, 400)}  # the webhook's two


def _json_response_made_directly(data: bytes, status: int) -> Response:
    """`json_response(data, status)`, the same object made directly: werkzeug's constructor checks the
    content type, looks up the status line and searches the headers on every call, for what is the
    same every time here."""
    status_line = _STATUS_LINES.get(status)
    if status_line is None:
        return json_response(data, status)
    headers = Headers()
    headers._list = [("Content-Type", codec.CONTENT_TYPE), ("Content-Length", str(len(data)))]  # Response's order
    response = Response.__new__(Response)
    response.__dict__.update(
        headers=headers,
        _status=status_line,
        _status_code=status,
        direct_passthrough=False,
        _on_close=[],
        response=[data],
    )
    return response


def _same_response(made: Response, expected: Response) -> bool:
    """The same class, attributes and header list (Headers' own == ignores order and case)."""
    mine, theirs = dict(vars(made)), dict(vars(expected))
    headers, expected_headers = mine.pop("headers"), theirs.pop("headers")
    return (
        type(made) is type(expected)
        and type(headers) is type(expected_headers)
        and vars(headers) == vars(expected_headers)
        and mine == theirs
    )


def _check_werkzeug_response() -> str | None:
    if not isinstance(vars(Headers()).get("_list"), list):
        return "werkzeug's Headers no longer keeps its headers in a _list"
    for status in _STATUS_LINES:
        for data in (b"", b'{"error":"x"}'):
            if not _same_response(_json_response_made_directly(data, status), json_response(data, status)):
                return f"werkzeug makes a {status} Response unlike the one made directly"
    return None


# --- prometheus_client --------------------------------------------------------------------------------------


def _observe_all_at_once(histogram: Any, values: list[float]) -> None:
    """`histogram.observe(value)` for each value, with each bucket and the sum updated once.

    A histogram without prometheus_client's Histogram's bounds, buckets and sum (`_upper_bounds`,
    `_buckets`, `_sum`) is given each value in turn.
    """
    bounds, buckets, total = (getattr(histogram, name, None) for name in ("_upper_bounds", "_buckets", "_sum"))
    if bounds is None or buckets is None or total is None:
        observe_each(histogram, values)
        return
    histogram._raise_if_not_observable()
    per_bucket: Counter[int] = Counter()
    for value in values:
        if value == value:  # NaN is in no bucket (it is not <= any bound), as observe() has it
            per_bucket[bisect_left(bounds, value)] += 1  # the first bucket whose bound is >= value
    total.inc(sum(values))
    for index, amount in sorted(per_bucket.items()):
        if index < len(buckets):
            buckets[index].inc(amount)


def _check_histogram_batch() -> str | None:
    from prometheus_client import Histogram  # not before gunicorn_conf.py set PROMETHEUS_MULTIPROC_DIR

    if not callable(getattr(Histogram, "_raise_if_not_observable", None)):
        return "prometheus_client's Histogram has no _raise_if_not_observable"
    observe = getattr(Histogram, "observe", None)
    names = set(code_names(observe))
    missing = {"_raise_if_not_observable", "_sum", "_upper_bounds", "_buckets", "inc"} - names
    if missing:
        return f"prometheus_client's Histogram.observe no longer uses {', '.join(sorted(missing))}"
    return None


# --- logging ------------------------------------------------------------------------------------------------

_TEMPLATES: dict[tuple[int, int], tuple[dict[str, Any], float]] = {}  # (pid, thread) -> (record, ms base)


def _record_template() -> tuple[dict[str, Any], float]:
    """The attributes of a LogRecord made in this process and thread (in the constructor's order), and
    the milliseconds to add to a time.time() * 1000 to get its relativeCreated."""
    key = (os.getpid(), threading.get_ident())
    known = _TEMPLATES.get(key)
    if known is None:
        made = logging.LogRecord("", logging.INFO, "(unknown file)", 0, "", (), None)
        known = _TEMPLATES[key] = (vars(made).copy(), made.relativeCreated - made.created * 1000)
    return known


def _record_from_template(
    logger: logging.Logger,
    created: float,
    msecs: float,
    level: int,
    message: str,
    args: tuple[object, ...],
    extra: Mapping[str, object],
) -> logging.LogRecord:
    """The record `record_made_by_logging` makes (`extra` already checked), without LogRecord's
    constructor: what only depends on the process and the thread (pid, thread and process names, the
    unknown caller) is copied from a record made once per thread."""
    template, relative_base = _record_template()
    record = logging.LogRecord.__new__(logging.LogRecord)
    attributes = record.__dict__
    attributes.update(template)  # then the record's own values, each in its place
    attributes["name"] = logger.name
    attributes["msg"] = message
    attributes["args"] = args
    attributes["levelname"] = logging.getLevelName(level)
    attributes["levelno"] = level
    attributes["created"] = created
    attributes["msecs"] = msecs
    attributes["relativeCreated"] = relative_base + created * 1000
    attributes.update(extra)  # as Logger.makeRecord, after the record's own attributes
    return record


def _check_log_record_template() -> str | None:
    if hasattr(logging.LogRecord, "__slots__"):
        return "logging.LogRecord has __slots__: its attributes are not all in its __dict__"
    logger = logging.getLogger("taintkeeper.webhook.fast_paths")
    created = time.time()
    msecs = int((created - int(created)) * 1000) + 0.0
    fields = (logger, created, msecs, logging.WARNING, "refused %s", ("x",), {"uid": "u"})
    ours = vars(_record_from_template(*fields))
    # logging's own record, from its constructor whatever the record factory, as Logger.makeRecord makes it
    theirs = vars(logging.LogRecord(logger.name, logging.WARNING, "(unknown file)", 0, "refused %s", ("x",), None))
    theirs.update(uid="u", created=created, msecs=msecs)
    if list(ours) != list(theirs):
        return f"a LogRecord has the attributes {list(theirs)}, not {list(ours)}"
    differing = sorted(name for name in ours if name != "relativeCreated" and ours[name] != theirs[name])
    if differing:
        return f"a LogRecord made from a template differs from logging's in {', '.join(differing)}"
    return None


def _check_caller_lookup() -> str | None:
    if not hasattr(logging, "_srcfile"):
        return "logging has no _srcfile"
    if "_srcfile" not in code_names(logging.Logger._log):
        return "logging.Logger._log no longer reads _srcfile"
    return None


# --- the checks -------------------------------------------------------------------------------------------

CHECKS: dict[str, Callable[[], str | None]] = {
    GUNICORN_SETTINGS: _check_gunicorn_settings,
    HTTP_DATE: _check_http_date,
    BASE_ENVIRON: _check_base_environ,
    PEER_TRUST: _check_peer_trust,
    WERKZEUG_RESPONSE: _check_werkzeug_response,
    HISTOGRAM_BATCH: _check_histogram_batch,
    LOG_RECORD_TEMPLATE: _check_log_record_template,
    CALLER_LOOKUP: _check_caller_lookup,
}
NEEDS = {BASE_ENVIRON: GUNICORN_SETTINGS, PEER_TRUST: GUNICORN_SETTINGS}  # they keep what they remember there

_FOUND: dict[str, str | None] = {}  # fast path -> None (its internal as expected) or why it is off: checked once


def _why_off(name: str) -> str | None:
    """None when fast path `name` may be taken in this process, else why not; its check runs once per process
    (a worker inherits the master's answers)."""
    if name not in _FOUND:
        try:
            why = CHECKS[name]()
        except Exception as error:  # a check that cannot even look has found the internal changed
            why = f"its check failed: {type(error).__name__}: {error}"
        needed = NEEDS.get(name)
        if why is None and needed is not None and _why_off(needed) is not None:
            why = f"it keeps what it remembers on {needed}, which is off"
        _FOUND[name] = why
    return _FOUND[name]
