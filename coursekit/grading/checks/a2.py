"""References of assignment 2 (added by its author)."""
