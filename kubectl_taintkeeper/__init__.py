"""The operator's commands: `kubectl taintkeeper status | explain | fence | unfence` (plugin.py), also
run as `python -m kubectl_taintkeeper` and, for the commands that came first, `python -m controller`.
They read the cluster live and use the controller's pure decisions to say what it will do; they never
import its loops (`make lint`: the import contracts)."""
