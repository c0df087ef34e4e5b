"""The one failure a loop treats as routine rather than as a bug."""

from __future__ import annotations


class ExpectedFailure(Exception):
    """A failure that happens now and then in normal operation (an API conflict, a server away).

    The reconcile loop logs its message in one line and retries with back-off; any other exception is a bug and
    is logged with its traceback. Both the client's API errors and the embedded server's derive from it.
    """
