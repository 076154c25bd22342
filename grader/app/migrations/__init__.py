"""Alembic migrations of the grading service's schema (applied by `grader db upgrade` or at app startup)."""
