"""Alembic migrations of the autotune database (shipped in the wheel as ``autotune.migrations``)."""
