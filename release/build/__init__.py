"""Building: toolchains, staging, host and container builds, repair."""
