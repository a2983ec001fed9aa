"""Who may read the webhook's /metrics: callers the apiserver authenticates and authorizes, as for the
controller's port (kube/delegated_auth.py), through the webhook's cluster client (--kubeconfig, else the
in-cluster config). With no client at all (a developer's machine, a test), only the always-allowed paths
are answered: an operator opens /metrics by adding it to --authorization-always-allow-paths.

/mutate is never checked (kube-apiserver calls it without a token), nor are the probes' paths.
"""

from __future__ import annotations

from kube.delegated_auth import DelegatedAuth, Refusal, Reviews, always_allowed
from kube.reviews import ApiReviews
from plumbing.auth_settings import ALWAYS_ALLOW_PATHS_FLAG, AuthSettings
from webhook.namespaces import api_client_source
from webhook.settings import WebhookSettings


class MetricsAccess:
    """`check(path, method, authorization)`: the refusal to send, or None to answer. `reviews` None: no
    cluster client, for the reason `no_client` gives."""

    def __init__(self, settings: AuthSettings, reviews: Reviews | None, no_client: str = "") -> None:
        self.settings = settings
        self._auth = DelegatedAuth(reviews, settings) if reviews is not None else None
        self._no_client = no_client

    @classmethod
    def from_settings(cls, settings: WebhookSettings) -> MetricsAccess:
        factory, source = api_client_source(settings)
        return cls(settings.auth, None if factory is None else ApiReviews(factory), source)

    def check(self, path: str, method: str, authorization: str | None) -> Refusal | None:
        if self._auth is not None:
            return self._auth.check(path, method, authorization)
        if always_allowed(path, self.settings.always_allow_paths):
            return None
        return Refusal(
            403,
            f"Forbidden: {path} is answered to callers the apiserver checks, and the webhook has no cluster client "
            f"({self._no_client}); {ALWAYS_ALLOW_PATHS_FLAG.flag} can open it to all",
        )
