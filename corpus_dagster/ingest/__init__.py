"""Ingestion (data.01): resolve ledger URLs, fetch with checksums, stream documents into raw parts."""
