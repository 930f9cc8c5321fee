"""Publishing: preflight of the whole set, the index client and uploads."""
