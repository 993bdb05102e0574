"""Command lines (run, demo, docs generation): thin over the Dagster layer and the stage drivers."""
