"""Ages and durations as kubectl prints them (AGE, DURATION, "3m ago"), for the server's Tables and the CLI."""

from __future__ import annotations

from datetime import timedelta


def human_duration(elapsed: float | timedelta) -> str:
    """Upstream's duration.HumanDuration: about two significant figures, e.g. 45s, 3m10s, 5h, 2d5h, 3y45d.

    Up to a second in the future still reads "0s" (clocks differ a little); further ahead is "<invalid>".
    """
    seconds = int(elapsed.total_seconds() if isinstance(elapsed, timedelta) else elapsed)
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    minutes, hours = seconds // 60, seconds // 3600
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if hours < 24 * 365 * 2:
        return f"{days}d"
    if hours < 24 * 365 * 8:
        return f"{days // 365}y{days % 365}d" if days % 365 else f"{days // 365}y"
    return f"{days // 365}y"
