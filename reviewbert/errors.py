"""The errors that mean "this input cannot work", each with a one-line message.

The CLI prints the message and exits with status 2; the pages show it beside the
input. (``data.DataError`` is the fourth kind: it lives with the data report it
describes.)
"""
from __future__ import annotations


class ConfigError(ValueError):
    """Hyperparameters that cannot work.

    ``errors`` maps each offending field to its message (each names the field)."""

    def __init__(self, message: str, errors: dict[str, str] | None = None):
        super().__init__(message)
        self.errors = errors or {}


class CheckpointError(Exception):
    """A checkpoint is missing, incomplete or not loadable; the message says why."""


class DiskFullError(CheckpointError):
    """The disk filled up (ENOSPC, or a quota) while saving; the previous save is kept."""
