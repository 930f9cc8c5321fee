"""Rebuilding a release from its manifest (`release reproduce`): what a rebuild needs, recorded
when the manifest is written, and what differs when a rebuild does not give the same bytes."""
