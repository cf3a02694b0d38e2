"""Compatibility toolsets: `ldims` (LDIMS's searchDocuments and extracted_content resource)
and `rag` (rag_search, list_documents, get_document). They answer in their original
systems' shapes, not in pgrag's envelope (`shape.COMPAT`), over pgrag's search and documents."""
