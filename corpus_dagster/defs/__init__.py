"""The thin Dagster layer: assets, checks, partitions, resources, schedules and sensors."""
