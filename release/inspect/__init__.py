"""Inspection: ELF facts, the verification rules and the verify report."""
