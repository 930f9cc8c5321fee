"""Planning: the matrix resolved once into frozen facts and steps (pure, no processes)."""
