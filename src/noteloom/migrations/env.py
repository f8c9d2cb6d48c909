"""Alembic environment: migrations run on the connection noteloom hands over."""

from alembic import context

from noteloom.db import metadata
from noteloom.migrations.compare import include_name

connection = context.config.attributes["connection"]
# include_name: what a comparison with the models leaves to the migrations (compare.py).
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True, include_name=include_name)
with context.begin_transaction():
    context.run_migrations()
