"""One module per CLI command: arguments in, a stage called with resolved steps, an exit code out."""
