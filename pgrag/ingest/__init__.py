"""Ingestion: parse files into structural units, chunk them, embed, store atomically."""
