"""webhook.flaskapp: the webhook's Flask answers as Flask does, binding each distinct URL once."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask, request, session, url_for

from webhook.flaskapp import WebhookFlask


def _app(flask_class: type[Flask], **config: object) -> Any:
    app = flask_class("routes")
    app.config.update(config)

    @app.post("/mutate")
    def mutate() -> dict[str, object]:
        return {"host": request.host, "url": url_for("mutate", _external=True), "args": request.args.to_dict()}

    @app.get("/items/<int:number>")
    def item(number: int) -> dict[str, object]:
        return {"number": number, "url": url_for("item", number=number + 1)}

    return app


CALLS = {
    "the apiserver's review": ("POST", "/mutate?timeout=10s", "taintkeeper-webhook.taintkeeper-system.svc:443"),
    "another host": ("POST", "/mutate", "10.0.0.7:8443"),
    "a path with an argument": ("GET", "/items/41", "localhost"),
    "a method not allowed": ("GET", "/mutate", "localhost"),
    "no such path": ("POST", "/nowhere", "localhost"),
    "a trailing slash redirect": ("GET", "/items/41/", "localhost"),
}


def _answer(app: Flask, method: str, path: str, host: str) -> tuple[int, bytes, str | None]:
    response = app.test_client().open(path, method=method, headers={"Host": host}, base_url=f"https://{host}")
    return response.status_code, response.data, response.headers.get("Location")


@pytest.mark.parametrize(
    "config",
    [{}, {"TRUSTED_HOSTS": ["localhost"]}, {"SERVER_NAME": "localhost"}],
    ids=["defaults", "trusted hosts", "a server name"],
)
def test_every_answer_is_flasks_the_first_time_and_every_time_after(config: dict[str, object]) -> None:
    ours, flasks = _app(WebhookFlask, **config), _app(Flask, **config)
    for _ in range(3):  # the first call binds the URL, later ones reuse it
        for method, path, host in CALLS.values():
            assert _answer(ours, method, path, host) == _answer(flasks, method, path, host)


def test_each_distinct_request_line_and_host_is_bound_once() -> None:
    app = _app(WebhookFlask)
    for _ in range(3):
        for method, path, host in CALLS.values():
            _answer(app, method, path, host)
    assert len(app._url_adapters) == len(CALLS)


def test_the_bound_urls_kept_start_over_past_the_limit() -> None:
    app = _app(WebhookFlask)
    for number in range(WebhookFlask.ADAPTERS_KEPT + 5):
        assert _answer(app, "GET", f"/items/{number}", "localhost")[0] == 200
    assert len(app._url_adapters) <= WebhookFlask.ADAPTERS_KEPT


def test_there_is_no_session_to_write_to() -> None:
    app = WebhookFlask("sessions")

    @app.get("/write")
    def write() -> str:
        session["user"] = "someone"
        return "written"

    @app.get("/read")
    def read() -> str:
        return f"{dict(session)} {session.new}"

    assert app.test_client().get("/read").data == b"{} False"
    assert app.test_client().get("/write").status_code == 500  # NullSession refuses every change
