"""Plain helper modules for the tests (imported by name), and the fixtures plugin the root conftest registers."""
