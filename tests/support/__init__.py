"""Helpers of the test suite, imported by test modules (which never import each other)."""
