"""taintkeeper's benchmarks: the webhook's throughput and latency under stuck clients, the taint
eviction manager and the node lifecycle monitor at scale, and a node failure end to end on the
local apiserver (see bench/README.md)."""
