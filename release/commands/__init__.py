"""One module per CLI command (`plan`, `build`, `verify`, …): arguments in, a stage called with
resolved steps, an exit code out; `release/cli.py` is the one place errors become exit codes."""
