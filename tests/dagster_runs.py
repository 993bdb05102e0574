"""What the tests of whole Dagster runs share: an in-process reference build, the bytes a user consumes, and
a run's failures spelled out for an assertion message."""

from __future__ import annotations

import hashlib
from pathlib import Path

import dagster as dg

from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.defs.runner import materialize_global, materialize_sources


def build_in_process(config: Path) -> CorpusConfig:
    """Every source run, then the corpus run, in this process on an ephemeral instance; the config's resource."""
    corpus = CorpusConfig(config_path=str(config))
    instance = dg.DagsterInstance.ephemeral()
    materialize_sources(corpus, instance)
    assert materialize_global(corpus, instance).success
    return corpus


def published_bytes(artifacts: Path) -> dict[str, str]:
    """sha256 of every file a user consumes: shards + manifest, token streams, dedup tables, releases.

    Dedup tables are named without their key folder: raw parts record their fetch time, so the stage keys
    of two fetches differ while every table byte must not."""
    out = {}
    for top in ("corpus/testset", "tokens/testset", "stages/dedup", "release"):
        for path in sorted((artifacts / top).rglob("*")):
            if path.is_file() and not path.name.startswith((".", "_RECORD")):
                name = f"{top}/{path.name}" if top == "stages/dedup" else str(path.relative_to(artifacts))
                out[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def failures(instance: dg.DagsterInstance, run_id: str | None) -> list[str]:
    """The failure messages of a run (with their errors) and its failed checks' metadata, for an assertion."""
    if run_id is None:
        return ["never started"]
    out = []
    for record in instance.get_records_for_run(run_id).records:
        event = record.event_log_entry.dagster_event
        if event is None:
            continue
        if event.event_type_value in ("STEP_FAILURE", "RUN_FAILURE", "ENGINE_EVENT"):
            out.append(f"{event.step_key}: {event.message}"[:2000])
            info = getattr(event.event_specific_data, "error", None)
            if info is not None:
                out.append(info.to_string()[:3000])
        elif event.event_type_value == "ASSET_CHECK_EVALUATION" and not event.event_specific_data.passed:
            out.append(f"{event.step_key}: {event.event_specific_data.metadata}"[:3000])
    return out
