"""Data access: SQL constants and the small functions that run them."""
