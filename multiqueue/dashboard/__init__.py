"""The manager's read-only web dashboard: workers and every dispatched Job, live."""
