"""Moving a memory: export to one archive file, import it back, migrate between stores.

Above ``graph_schema`` (it only calls `MemoryStore` verbs, the transfer verbs above
all) and below ``server`` (the CLI's ``export``, ``import`` and ``migrate`` are thin
over it), so the maintenance loop can reach it too.
"""
