"""This distribution's installed version, for what names it to others: the User-Agent the
broker sends, and the serverInfo `specgen mcp` answers `initialize` with."""

from __future__ import annotations


def installed_version() -> str:
    """The installed version of plimsoll-specgen, or "" when it is not installed (run
    from a source folder); importlib.metadata is imported only when it is asked for."""
    from importlib import metadata

    try:
        return metadata.version("plimsoll-specgen")
    except metadata.PackageNotFoundError:
        return ""


__all__ = ["installed_version"]
