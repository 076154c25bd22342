"""The service's client as plain functions: http.py (the JSON API's calls, retries, one-line errors), settings.py
(server and token from options, GRADER_* variables or the config file) and batch.py (batch upload, resume, follow,
results and exports). The `grader` client commands (grader/cli/client.py, roster.py) are a click layer over them.

Imports only requests, never flask or torch.
"""
