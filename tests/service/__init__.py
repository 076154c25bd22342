"""Tests of the grading service: store, API, migrations, and end to end with real workers."""
