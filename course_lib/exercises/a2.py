"""Checks of assignment 2 (records added by its author)."""
