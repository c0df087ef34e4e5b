"""The embedded API server's own object rules (apply, patches, managed fields, validation of the kinds only the
server handles): pure functions on plain dicts, no I/O. The rules the dispatcher and controllers share stay in
:mod:`multiqueue.api`."""
