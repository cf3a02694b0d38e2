"""REST routes by concern: search, documents, ops (health, metrics, status)."""
