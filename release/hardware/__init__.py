"""The hardware tier: one leg (a wheel, a Python, a role) installed and run on a GPU machine."""
