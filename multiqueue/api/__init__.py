"""Kubernetes object rules as pure functions on plain dicts; no I/O, never raising on malformed input."""
