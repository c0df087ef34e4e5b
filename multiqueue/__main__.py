"""Lets `python -m multiqueue` behave like the `multiqueue` console script."""

from multiqueue.cli import main

raise SystemExit(main())
