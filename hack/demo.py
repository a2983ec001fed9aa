"""The local demo (`make demo`): a real kube-apiserver, the webhook over TLS, a pod that gets
the default NoExecute tolerations. Everything it starts is stopped at the end.

Flags: --keep leaves the control plane and the webhook running (Ctrl-C stops them);
--dir DIR puts the control plane's files somewhere other than .local/demo.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kubernetes import client, config  # noqa: E402

from hack.servers import WebhookServer, make_certs  # noqa: E402
from webhook.registration import mutating_webhook_configuration  # noqa: E402

SCRIPT = ROOT / "hack" / "local-cluster.sh"
STARTED = time.monotonic()


def say(message: str) -> None:
    print(f"[{time.monotonic() - STARTED:6.1f}s] {message}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=ROOT / ".local" / "demo")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    directory: Path = args.dir.resolve()
    directory.mkdir(parents=True, exist_ok=True)

    say("starting etcd + kube-apiserver 1.20.2 on loopback (the first run on a machine builds it: minutes)")
    up = subprocess.run(["bash", str(SCRIPT), "up", str(directory)], text=True, stdout=subprocess.PIPE)
    if up.returncode != 0:
        print("demo: the local control plane did not start (see the messages above)", file=sys.stderr)
        return 1
    kubeconfig = up.stdout.strip().splitlines()[-1]
    api = config.new_client_from_config(config_file=kubeconfig)
    webhook = None
    try:
        say(f"control plane ready; kubeconfig {kubeconfig}")
        ca_bundle = make_certs(directory / "webhook-certs")
        say(f"made a CA and a serving certificate with `python -m certs` in {directory / 'webhook-certs'}")
        webhook = WebhookServer(directory / "webhook-certs", directory / "webhook.log", workers=2).start()
        say(f"webhook serving over TLS at {webhook.url} (gunicorn, 2 workers; log {directory / 'webhook.log'})")

        admission = client.AdmissionregistrationV1Api(api)
        registration = mutating_webhook_configuration(ca_bundle, url=webhook.url, failure_policy="Fail")
        name = registration["metadata"]["name"]  # type: ignore[index]
        try:
            admission.delete_mutating_webhook_configuration(name)
        except client.ApiException as error:
            if error.status != 404:
                raise
        admission.create_mutating_webhook_configuration(body=registration)
        say(f"registered MutatingWebhookConfiguration {name!r}")

        core = client.CoreV1Api(api)
        pod = {"metadata": {"name": "demo"}, "spec": {
            "containers": [{"name": "app", "image": "busybox"}],
            "tolerations": [{"key": "example.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}}
        deadline = time.monotonic() + 30
        while True:  # the apiserver picks up a new webhook configuration within a moment
            created = json.loads(core.create_namespaced_pod("default", body=pod, dry_run="All",
                                                            _preload_content=False).data)
            if len(created["spec"].get("tolerations") or []) > 1 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        try:
            core.delete_namespaced_pod("demo", "default", grace_period_seconds=0)
        except client.ApiException as error:
            if error.status != 404:
                raise
        created = json.loads(core.create_namespaced_pod("default", body=pod, _preload_content=False).data)
        say("created pod default/demo with one toleration of its own; the API now stores:")
        for toleration in created["spec"].get("tolerations") or []:
            seconds = toleration.get("tolerationSeconds")
            print(f"           - {toleration.get('key', '*')}:{toleration.get('effect', '*')} "
                  f"operator={toleration.get('operator')}" + (f" tolerationSeconds={seconds}" if seconds else ""))
        core.delete_namespaced_pod("demo", "default", grace_period_seconds=0)
        admission.delete_mutating_webhook_configuration(name)
        if args.keep:
            say("--keep: leaving the control plane and webhook up; Ctrl-C to stop them")
            while True:
                time.sleep(3600)
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        if webhook is not None:
            webhook.stop()
        api.close()
        subprocess.run(["bash", str(SCRIPT), "down", str(directory)], capture_output=True)
        say("stopped the webhook and the control plane")


if __name__ == "__main__":
    sys.exit(main())
