"""Publishing (data.06): deterministic shards sorted by id, the manifest, and their verification."""
