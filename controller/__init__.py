"""taintkeeper's controller: taint-based eviction (and, next, node lifecycle monitoring)."""
