"""The embedded default: Kubernetes-compatible local clusters on loopback."""
