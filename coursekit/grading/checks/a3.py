"""References of assignment 3 (added by its author)."""
