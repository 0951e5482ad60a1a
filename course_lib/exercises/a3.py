"""Checks of assignment 3 (records added by its author)."""
