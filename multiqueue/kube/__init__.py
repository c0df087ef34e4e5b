"""Talking to any Kubernetes API server: client, informers, work queue, leader election, events."""
