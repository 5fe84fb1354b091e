"""CI registry, hardware catalog, partitioner, suite runner, workflow generator and audit."""
