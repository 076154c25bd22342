"""Autograder for the 'build and defend your own transformer' capstone."""
__version__ = "0.1.0"
CONTRACT_VERSION = 1
