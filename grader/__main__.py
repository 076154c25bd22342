"""`python -m grader`: the same command as `grader`."""
from .cli import main

main()
