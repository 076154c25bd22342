"""Tests of the `grader` client: error paths against the API, and a batch end to end against the real service."""
