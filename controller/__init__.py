"""taintkeeper's controller: one process running three controllers, active on one replica at a time.

- `nodelifecycle/`: node health, Unknown conditions, NoSchedule condition taints, per-zone NoExecute tainting;
- `tainteviction/`: deletes pods on NoExecute taints once their tolerations run out;
- `backfill/`: appends the default tolerations to pods admitted without them.

Each has its pure decisions (`decision.py`), its loop (the component), its API edge (`api.py`) and
its metrics (`metrics.py`). Around them: `runner.py` wires the components (`component.py`) to the
shared informers (`informers.py`) and leader election; `options.py` parses the flags; `objects.py`
holds the slim views the informers keep; `workqueue.py`, `token_bucket.py` and `clock.py` are what
the loops share; `explain.py` and `kubectl_plugin.py` are the `explain` command; `health.py` serves
the probes and metrics. All API access goes through kube/.
"""
