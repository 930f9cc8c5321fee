"""Smoke tests: fresh environments in real or simulated images."""
