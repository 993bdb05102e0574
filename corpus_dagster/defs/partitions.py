"""The one partitions definition: a partition per ledger source, kept in sync by the ledger sensor."""

import dagster as dg

SOURCE_PARTITIONS_NAME = "source_id"

source_partitions = dg.DynamicPartitionsDefinition(name=SOURCE_PARTITIONS_NAME)
