"""Adoption: set up another project's repository."""
