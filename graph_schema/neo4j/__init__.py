"""The Neo4j backend: one store class (`store.py`) assembled from one module per feature.

Every Cypher statement lives in `queries.py`, the schema DDL in `schema.cypher`.
"""
