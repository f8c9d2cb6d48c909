"""A plugin installed as users install one, for a server started in another process: a
module beside a ``*.dist-info`` whose entry point is in the ``noteloom`` group, in a folder
that process puts on its import path (``PYTHONPATH``)."""

from __future__ import annotations

from pathlib import Path


def install_plugin(site: Path, module: str, source: str | None = None, *, entry: str | None = None,
                   dist: str | None = None, version: str = "0.1") -> Path:
    """Make ``site`` hold ``module`` (written from ``source`` when given; otherwise it is found
    elsewhere on the path) as the installed distribution ``dist`` (the module's name by default),
    whose ``noteloom`` entry point ``entry`` (the module's name by default) loads it. Returns ``site``."""
    site.mkdir(parents=True, exist_ok=True)
    if source is not None:
        (site / f"{module}.py").write_text(source, encoding="utf-8")
    name = dist or module.replace("_", "-")
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[noteloom]\n{entry or module} = {module}\n", encoding="utf-8")
    return site
