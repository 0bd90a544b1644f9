"""What is stored and how: models, errors, identity, the `MemoryStore` protocol and its two backends.

Import from the modules themselves (`palimpsest.graph_schema.store`, `.backends`,
`.models`, ...): this package's ``__init__`` stays empty so that importing one of them
loads nothing else.
"""
