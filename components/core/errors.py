"""Errors shared by every component."""
from __future__ import annotations


class ConfigError(ValueError):
    """An option with a bad value; the message names the option and the value."""
