"""Generic reads: structured, read-only queries over the data sources a user opts in.

``DataCatalog`` (built by the composition root from ``noteloom.toml``'s ``[data]``) knows
the sources: the workspace's own entities and tables of attached read-only databases.
``describe_data`` and ``query_data`` (``noteloom.default_plugins.data_tools``) are its
tools; ``catalog_line`` is the one line a system prompt carries about them.
"""

from noteloom.data.catalog import DataCatalog, catalog_line, missing
from noteloom.data.sources import WORKSPACE, is_credential

__all__ = ["WORKSPACE", "DataCatalog", "catalog_line", "is_credential", "missing"]
