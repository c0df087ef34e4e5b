"""The ground floor both sides share: the controller runtime (declaration, sources, runner), reconcile loop, work
queue, back-off, task and private-file helpers.

It imports nothing else of multiqueue, so the embedded API server and the client side can both stand on it.
"""
