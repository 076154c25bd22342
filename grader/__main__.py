"""`python -m grader`: the same command as `grader`."""
from .cli import entry

entry()
