"""The one place for what tests share: in-memory stand-ins for the API's surroundings (fakes.py),
builders of tolerations, taints, pods and nodes (builders.py), raw HTTP responses (responses.py), and the
taint eviction manager worked off without threads (eviction.py). The fake clock is controller.clock's
FakeClock (benchmarks use it too); polling until a condition holds is hack.wait's wait_for."""
