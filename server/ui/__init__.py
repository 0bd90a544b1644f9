"""The web viewer: partitions, threads, a thread's summary DAG, search and health, served under ``/ui``."""
