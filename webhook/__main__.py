"""`python -m webhook`: validate flags, then serve the webhook with gunicorn over TLS.

Each flag overrides its TAINTKEEPER_* environment variable (webhook/settings.py). A bad value
(including a --kubeconfig that does not load) ends the start with one line on stderr and exit code 2.
"""

from __future__ import annotations

import os
import sys

from plumbing.arguments import OneLineErrorParser
from webhook.settings import (
    APP_SETTINGS,
    BOOLEAN_SETTINGS,
    SERVING_SETTINGS,
    ServingSettings,
    SettingsError,
    WebhookSettings,
    check_kubeconfig,
    patch_for_gevent,
)


def parse_args(argv: list[str]) -> dict[str, str]:
    """The flags given, as {environment variable: value}."""
    parser = OneLineErrorParser(prog="python -m webhook", label="webhook", description=__doc__.splitlines()[0])
    for setting in (*APP_SETTINGS, *SERVING_SETTINGS):
        bare = {"nargs": "?", "const": "true"} if setting in BOOLEAN_SETTINGS else {}
        parser.add_argument(
            setting.flag,
            dest=setting.env,
            metavar="VALUE",
            **bare,  # type: ignore[arg-type]
            help=f"{setting.help} (env {setting.env}, default {setting.default})",
        )
    given = vars(parser.parse_args(argv))
    return {env: value for env, value in given.items() if value is not None}


def main(argv: list[str] | None = None) -> None:
    overrides = parse_args(sys.argv[1:] if argv is None else argv)
    os.environ.update(overrides)
    try:
        settings = WebhookSettings.from_env()
        serving = ServingSettings.from_env()
        serving.check_files()
        patch_for_gevent(serving)  # before check_kubeconfig imports urllib3
        check_kubeconfig(settings)
    except SettingsError as error:
        print(f"webhook: error: {error}", file=sys.stderr)
        sys.exit(2)

    from gunicorn.app.wsgiapp import WSGIApplication

    sys.argv = ["gunicorn", "-c", "python:webhook.gunicorn_conf", "webhook.app:create_app()"]
    WSGIApplication("%(prog)s [OPTIONS] [APP_MODULE]").run()


if __name__ == "__main__":
    main()
