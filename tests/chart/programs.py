"""What the controller and the webhook make of the arguments a render gives them: their own parsers, which
refuse a flag or value they do not take (the controller raises OptionsError, the webhook exits 2)."""

from __future__ import annotations

from typing import Any

from controller.options import ControllerOptions, parse_options
from tests.chart.helm import container_args
from webhook.__main__ import parse_args as webhook_args
from webhook.settings import ServingSettings, WebhookSettings


def controller_options(docs: list[dict[str, Any]]) -> ControllerOptions:
    return parse_options(container_args(docs, "taintkeeper-controller"))


def webhook_settings(docs: list[dict[str, Any]]) -> tuple[WebhookSettings, ServingSettings]:
    env = webhook_args(container_args(docs, "taintkeeper-webhook"))
    return WebhookSettings.from_env(env), ServingSettings.from_env(env)
