"""`python -m certs unregister`: delete the webhook's MutatingWebhookConfiguration, first of everything.

The chart runs it as a pre-delete hook (charts/taintkeeper/templates/uninstall-hook.yaml): Helm deletes
a release's Deployments before its MutatingWebhookConfiguration, so without it the apiserver would go on
calling a webhook whose pods are going. Gone already is fine (exit 0); any other failure exits 1 with one
line, and the uninstall stops there, before anything else is deleted.
"""

from __future__ import annotations

import sys

from kubernetes import client
from kubernetes.client.rest import ApiException

from kube.client import REQUEST_TIMEOUT, release
from kube.errors import describe_error, is_not_found
from plumbing.arguments import OneLineErrorParser


def unregister(api_client: client.ApiClient, configuration: str) -> str:
    """Delete the configuration; what happened, in a few words. Raises ApiException on a failure."""
    admission = client.AdmissionregistrationV1Api(api_client)
    try:
        release(
            admission.delete_mutating_webhook_configuration(
                configuration, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
            )
        )
    except ApiException as error:
        if is_not_found(error):
            return f"MutatingWebhookConfiguration {configuration} was already gone"
        raise
    return f"MutatingWebhookConfiguration {configuration} deleted"


def main(argv: list[str]) -> int:
    parser = OneLineErrorParser(
        prog="python -m certs unregister", label="certs unregister", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--webhook-configuration", default="taintkeeper", help="its name (%(default)s)")
    parser.add_argument("--kubeconfig", default=None, help="default: in-cluster, then KUBECONFIG")
    args = parser.parse_args(argv)
    if not args.webhook_configuration:
        parser.error("--webhook-configuration must not be empty")

    from kube.client import ClientConfigError, make_api_client
    from kube.identity import CERTS

    try:
        api_client = make_api_client(args.kubeconfig, component=CERTS)
    except ClientConfigError as error:
        parser.error(str(error))
    try:
        print(f"certs unregister: {unregister(api_client, args.webhook_configuration)}", file=sys.stderr)
    except ApiException as error:
        print(f"certs unregister: error: {args.webhook_configuration}: {describe_error(error)}", file=sys.stderr)
        return 1
    finally:
        api_client.close()
    return 0
