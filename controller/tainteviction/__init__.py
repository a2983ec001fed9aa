"""The taint eviction controller (`taint-eviction-controller`): deletes pods on NoExecute taints
once their tolerations run out."""
