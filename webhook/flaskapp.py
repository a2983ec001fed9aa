"""The webhook's Flask class: Flask without per-request work that gives the same result every time.

bench/static_app.py makes its constant-answer app with it too, so the benchmark's ceiling is the
same stack as the webhook's.
"""

from __future__ import annotations

from typing import Any

from flask import Flask
from flask.sessions import NullSession, SessionInterface
from werkzeug.routing import MapAdapter


class _NoSessions(SessionInterface):
    """No session: the webhook keeps no state between requests. Flask's default interface looks for a
    secret key and makes a new NullSession for every request; this one hands out a single NullSession,
    which refuses every change just the same."""

    null_session_class = NullSession

    def __init__(self) -> None:
        self._null = NullSession()

    def open_session(self, app: Flask, request: Any) -> NullSession:
        return self._null

    def make_null_session(self, app: Flask) -> NullSession:
        return self._null

    def save_session(self, app: Flask, session: Any, response: Any) -> None:
        return None


class WebhookFlask(Flask):
    """Flask, with each request's URL adapter made once per distinct request line and host.

    Flask binds the URL map to every request's environ (`bind_to_environ`: the host read and
    validated, IDNA-encoded, the path decoded), for the same adapter every time (the apiserver POSTs
    /mutate to one host). A `MapAdapter` is not changed by matching or building URLs, so one is handed
    to every request whose environ holds the same values of everything binding reads. Any other
    configuration (trusted hosts, SERVER_NAME, host or subdomain matching) is bound per request, as by
    Flask.
    """

    ADAPTERS_KEPT = 64  # distinct (host, method, path, ...) combinations kept; more start over
    session_interface = _NoSessions()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._url_adapters: dict[tuple[object, ...], tuple[MapAdapter | None, str]] = {}

    def create_url_adapter(self, request: Any) -> MapAdapter | None:
        config = self.config
        if (
            request is None
            or config["TRUSTED_HOSTS"] is not None
            or request.trusted_hosts is not None
            or config["SERVER_NAME"] is not None
            or self.url_map.host_matching
            or self.subdomain_matching
        ):
            return super().create_url_adapter(request)
        environ = request.environ
        get = environ.get
        key = (
            get("HTTP_HOST"),
            get("SERVER_NAME"),
            get("SERVER_PORT"),
            environ["wsgi.url_scheme"],
            get("HTTP_CONNECTION"),
            get("HTTP_UPGRADE"),
            get("SCRIPT_NAME"),
            get("PATH_INFO"),
            get("QUERY_STRING"),
            environ["REQUEST_METHOD"],
            self.url_map.default_subdomain,
        )
        known = self._url_adapters.get(key)
        if known is None:
            adapter = super().create_url_adapter(request)
            if len(self._url_adapters) >= self.ADAPTERS_KEPT:
                self._url_adapters.clear()
            known = self._url_adapters[key] = (adapter, request.host)
        else:
            request.host = known[1]  # as Flask's create_url_adapter sets it
        return known[0]
