"""Helpers shared by the integration, compatibility and end-to-end tests."""
