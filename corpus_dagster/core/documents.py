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
