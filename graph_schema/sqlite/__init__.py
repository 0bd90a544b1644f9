"""The embedded SQLite backend: one store class (`store.py`) assembled from one module per feature."""
