"""The one place for what tests share: fake clocks (clock.py), in-memory stand-ins for the API's
surroundings (fakes.py), builders of tolerations, taints, pods and nodes (builders.py), and raw
HTTP responses (responses.py)."""
