"""A Kubernetes-compatible API server for local clusters: aiohttp in front, SQLite behind."""
