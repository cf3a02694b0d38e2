"""Search: SQL ranking (pgrag.hybrid_search and friends), smart snippets, token-bounded pages."""
