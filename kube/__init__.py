"""The controller's only contact with the API: client construction (client.py) and list/watch (informer.py)."""
