"""References of assignment 1 (added by its author)."""
