"""pgrag: a Postgres-native RAG server."""

__version__ = "0.1.0"
