"""What the dataset card tells besides the data's statistics: the release's own facts (name, tokenizer,
languages, licence, settings), the corpus build's counts and stage runs, how to reproduce it, and the rows
of the cleaning table. Pure: the record's readers and writers live in the driver and the build."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

import polars as pl

from corpus_dagster.core.records import StageRecord
from corpus_dagster.core.settings import ReleaseSettings, Settings
from corpus_dagster.release import card as card_mod
from corpus_dagster.release.rows import length_column

PACKAGE = "corpus_dagster"  # the distribution name in pyproject.toml


def source_link(fact: Mapping[str, Any]) -> str | None:
    """Where a reader finds a source: its Hub dataset page, else the ledger's homepage, else the first remote
    (http, https, hf://datasets/) URL of its row; None for a source of local files only."""
    if fact.get("hub_dataset"):
        return f"https://huggingface.co/datasets/{fact['hub_dataset']}"
    if fact.get("homepage"):
        return str(fact["homepage"])
    for url in fact.get("urls") or ():
        if url.startswith(("https://", "http://")):
            return url
        if url.startswith("hf://datasets/"):
            repo = "/".join(url.removeprefix("hf://datasets/").split("/")[:2]).split("@")[0]
            return f"https://huggingface.co/datasets/{repo}"
    return None


def release_info(name: str, version: str, tokenizer: str, plan: pl.DataFrame, facts: Mapping[str, Mapping[str, Any]],
                 settings: ReleaseSettings, tokenizer_kind: str | None = None,
                 tokenizer_sha256: str | None = None) -> dict[str, Any]:
    """The card's facts of the release itself, from the plan: languages by document count, the build date
    (configured, else the newest document's), the licence, the settings that decided the buckets, the
    tokenizer's family and vocabulary sha256, each source's link and description, the citation."""
    plain = settings.to_dict()  # the card shows the values as the config spells them
    langs = plan.filter(pl.col("lang") != "und").group_by("lang").len().sort(["len", "lang"], descending=[True, False])
    build_date = settings.build_date
    if not build_date:
        build_date = plan["created_at"].max().date().isoformat() if plan.height else settings.created_at_fallback[:10]
    licenses = [facts[s]["license_spdx"] for s in sorted(set(plan["source_id"].to_list()))]
    return {
        "name": name,
        "version": version,
        "pretty_name": settings.pretty_name or name,
        "tokenizer": tokenizer,
        "tokenizer_kind": tokenizer_kind,
        "tokenizer_sha256": tokenizer_sha256,
        "length_column": length_column(tokenizer),
        "build_date": str(build_date),
        "license": settings.license or card_mod.hub_license(licenses),
        "languages": langs["lang"].to_list(),
        "task_categories": list(settings.task_categories),
        "tags": list(settings.tags),
        "settings": {k: plain[k] for k in ("bucket_width", "min_tokens", "max_tokens", "max_segments",
                                             "per_bucket_cap", "per_source_cap", "seed", "part_tokens")},
        "sources": {sid: {"link": source_link(f), "description": f.get("description") or "",
                          "category": f.get("category")} for sid, f in sorted(facts.items())},
        "citation": settings.citation,
    }


def package_version() -> str:
    """The installed corpus_dagster version (the package's __version__ when it runs uninstalled)."""
    try:
        return importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        from corpus_dagster import __version__

        return __version__


def card_build_info(manifest: Mapping[str, Any], build: Mapping[str, Any] | None) -> dict[str, Any]:
    """The card info's corpus, build and reproduce parts: counts from the shard manifest, stage runs from
    `build`. Only relative paths: a ledger outside the artifacts root is named by its config key."""
    build = build or {}
    dedup = manifest.get("dedup", {})
    ref = manifest.get("ledger_ref") or "corpus/LEDGER.jsonl"
    return {
        "corpus": {
            "fetched": build.get("fetched"),
            "filters": {k: int(v) for k, v in manifest.get("filters", {}).items()},
            "dedup": {k: int(dedup.get(k, 0)) for k in ("exact_dropped", "near_dropped", "decontaminated")},
            "repairs": {k: int(v) for k, v in manifest.get("repairs", {}).items()},
            "pii": {k: int(v) for k, v in manifest.get("pii", {}).items()},
            "published": int(manifest.get("n_docs", 0)),
            **({"docs_redacted": redacted} if (redacted := _docs_redacted(build)) is not None else {}),
        },
        "build": {"steps": list(build.get("steps", [])),
                  "code_versions": dict(build.get("code_versions", {}))},
        "reproduce": {
            "config_sha256": manifest.get("config_sha256", ""),
            "ledger_sha256": manifest.get("ledger_sha256") or build.get("ledger_sha256", ""),
            "ledger_ref": "<paths.ledger of the config>" if PurePosixPath(ref).is_absolute() else ref,
            "package": PACKAGE,
            "package_version": package_version(),
            "release_path": build.get("release_path"),
        },
    }


def _docs_redacted(build: Mapping[str, Any]) -> int | None:
    """Documents the scrub stage put a placeholder in, over its per-source runs; None without stage runs."""
    scrub = [st for st in build.get("steps", []) if st.get("stage") == "scrub"]
    return sum(int(st["counts"].get("documents redacted", 0)) for st in scrub) if scrub else None


def cleaning_rows(
    manifest: Mapping[str, Any], excluded: Mapping[str, int], plan_counts: Mapping[str, Any],
    no_segment: Mapping[str, int], tails: int,
) -> list[dict[str, Any]]:
    """Drops and repairs by stage and reason, from the shard manifest, the ingest selection and the release."""
    rows = [{"stage": "ingest", "reason": f"where ({sid})", "count": int(n)} for sid, n in sorted(excluded.items())]
    rows += [{"stage": "clean", "reason": f"filter {k}", "count": int(v)} for k, v in manifest.get("filters", {}).items()]
    rows += [{"stage": "clean", "reason": f"repaired {k} (kept)", "count": int(v)} for k, v in manifest.get("repairs", {}).items()]
    dedup = manifest.get("dedup", {})
    rows += [{"stage": "dedup", "reason": k, "count": int(dedup.get(k, 0))}
             for k in ("exact_dropped", "near_dropped", "decontaminated")]
    rows += [
        {"stage": "release", "reason": "under min_tokens (after cleaning and repair)",
         "count": sum(plan_counts["below_min_tokens"].values())},
        {"stage": "release", "reason": "exact_duplicate", "count": int(plan_counts["exact_duplicates"])},
        {"stage": "release", "reason": "over per-source bucket cap", "count": sum(plan_counts["over_cap"].values())},
        {"stage": "release", "reason": "segment tail dropped (documents)", "count": int(tails)},
    ]
    rows += [{"stage": "release", "reason": f"too long, not segmented ({k})", "count": int(v)}
             for k, v in sorted(no_segment.items())]
    return rows



def _pick(d: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    """The entries of `d` under `keys` that it has."""
    return {k: d[k] for k in keys if k in d}


def _enabled(recorded: Mapping[str, Any]) -> list[str]:
    """Names of the sub-sections a stage record's settings switch on (clean filters, scrub detectors)."""
    return sorted(k for k, v in recorded.items() if isinstance(v, Mapping) and v.get("enabled"))


def construction_step(stage: str, source: str | None, record: StageRecord, manifest: Mapping[str, Any],
                      settings: Settings) -> dict[str, Any]:
    """One Construction row from a stage record: its counts and the settings that decided its output."""
    st, cfg = record.stats, record.settings if isinstance(record.settings, Mapping) else {}
    counts: dict[str, Any]
    shown: dict[str, Any]
    if stage == "ingest":
        counts = {"documents": st.get("docs", 0), "excluded by where": st.get("excluded_by_where", 0),
                  "quarantined": sum(int(v) for v in (st.get("quarantined") or {}).values())}
        shown = dict(cfg)
    elif stage == "clean":
        counts = {"in": st.get("docs_in", 0), "kept": st.get("kept", 0), "rejected": st.get("rejected", 0),
                  "repaired": sum(int(v) for v in (st.get("repairs") or {}).values())}
        shown = {"filters": _enabled(cfg), "repair": sorted(k for k, v in (cfg.get("repair") or {}).items() if v)}
    elif stage == "minhash":
        counts = {"documents": st.get("docs", 0), "no signature": st.get("no_signature", 0)}
        shown = _pick(cfg, "num_perm", "shingle_size", "scheme", "seed")
    elif stage == "dedup":
        counts = {"in": st.get("docs", 0), "exact dropped": st.get("exact_dropped", 0),
                  "near dropped": st.get("near_dropped", 0), "decontaminated": st.get("decontaminated", 0)}
        # what the stage used: its policy and the near-duplicate graph's banding (chosen when not configured)
        shown = _pick(st.get("settings") or {}, "jaccard_threshold", "num_perm", "bands", "rows", "ngram", "action")
    elif stage == "scrub":
        counts = {"documents": st.get("docs", 0), "documents redacted": st.get("docs_redacted", 0),
                  "placeholders": sum(int(v) for v in (st.get("pii") or {}).values())}
        shown = {"detectors": _enabled(cfg)}
    elif stage == "publish":
        counts = {"documents": manifest.get("n_docs", 0), "shards": manifest.get("n_shards", 0)}
        shown = {"shard_rows": settings.shard_rows, "val_permille": settings.val_permille}
    elif stage == "tokens":
        counts = {"documents": st.get("n_docs", 0), "tokens": st.get("n_tokens", 0)}
        shown = {"tokenizer": cfg.get("name") or cfg.get("encoding") or cfg.get("path"),
                    **_pick(cfg, "kind", "eod_token", "bos_token")}
    else:  # analysis
        dup = (st.get("steps") or {}).get("duplicates") or {}
        counts = {"documents with exact duplicates": dup.get("docs_with_exact", 0),
                  "documents with near duplicates": dup.get("docs_with_near", 0)}
        shown = _pick(cfg, "pair_threshold", "cluster_thresholds", "tokenizers")
    return {"stage": stage, "source": source, "code_version": record.code_version,
            "counts": {k: int(v) for k, v in counts.items()}, "settings": shown}

