"""Fuzzing, crash loops and hostile clients against the embedded API server (run with ``-m robustness``)."""
