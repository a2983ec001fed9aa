"""The out-of-service handling (`out-of-service`): force-deletes the pods and deletes the volume
attachments of a node that carries `node.kubernetes.io/out-of-service` and is not Ready (KEP-2268),
and, with --auto-fence-after, puts that taint on an unreachable node an external agent confirmed is off."""
