"""Checks of assignment 1 (records added by its author)."""
