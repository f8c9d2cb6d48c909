"""The markers of noteloom's plugin hooks, below everything that names what the hooks carry.

Plugin authors import ``hookimpl`` from :mod:`noteloom.plugins`, the public module, which
re-exports it. noteloom's own tool plugins import it from here: they sit in the tools layer,
below ``noteloom.plugins``, which names provider types and so sits in the engine layer.
"""

from __future__ import annotations

import pluggy

#: The pluggy project name, and the entry-point group installed plugins declare.
PROJECT = "noteloom"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

__all__ = ["PROJECT", "hookimpl", "hookspec"]
