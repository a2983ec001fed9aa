"""taintkeeper's controller: one process running four controllers, active on one replica at a time.

- `nodelifecycle/`: node health, Unknown conditions, NoSchedule condition taints, per-zone NoExecute tainting;
- `tainteviction/`: deletes pods on NoExecute taints once their tolerations run out;
- `backfill/`: appends the default tolerations to pods admitted without them;
- `outofservice/`: force deletes the pods and deletes the volume attachments of a node tainted
  `node.kubernetes.io/out-of-service` that is not Ready (KEP-2268), and with --auto-fence-after taints
  a node whose fencing an external agent confirmed.

Each has its pure decisions (`decision.py`), its loop (the component), its API edge (`api.py`) and
its metrics (`metrics.py`). Around them: `runner.py` wires the components (`component.py`) to the
shared informers (`informers.py`) and leader election; `options.py` parses the flags; `objects.py`
holds the slim views the informers keep; `workqueue.py`, `token_bucket.py` and `clock.py` are what
the loops share; `explain.py` and `kubectl_plugin.py` are the `explain` command, `fencing*.py` the
`fence` and `unfence` commands; `health.py` serves the probes and metrics. All API access goes
through kube/.
"""
