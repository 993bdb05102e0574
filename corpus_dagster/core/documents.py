"""The document columns and the published shard schema (docs/formats.md), column for column."""

import pyarrow as pa

# The document columns every per-source stage table and the shards share, in contract order.
DOCUMENT_FIELDS = [
    ("id", pa.string()),
    ("text", pa.string()),
    ("source_id", pa.string()),
    ("url", pa.string()),
    ("license_spdx", pa.string()),
    ("lang", pa.string()),
    ("n_chars", pa.int32()),
    ("sha256", pa.binary(32)),
]

# The document info table (ingest's per-document extras: its `_FIELDS.parquet` and `document_info`) names its
# own columns with a leading underscore, so no field a source ships (`id`, `url`, `fetched_at`) can clash.
INFO_DOC_ID = "_doc_id"  # `<source_id>:<k>`
INFO_FETCHED_AT = "_fetched_at"  # RFC 3339 fetch time
INFO_COLUMNS = (INFO_DOC_ID, INFO_FETCHED_AT)

SHARD_SCHEMA = pa.schema(
    [
        *DOCUMENT_FIELDS,
        ("minhash_cluster", pa.int64()),
        ("pii_redactions", pa.int32()),
        ("split", pa.string()),
    ]
)


def shard_name(index: int, count: int) -> str:
    """shard-<iiiii>-of-<nnnnn>.parquet, index 0-based."""
    return f"shard-{index:05d}-of-{count:05d}.parquet"
