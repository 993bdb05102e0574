"""The dataset card (README.md with YAML front matter), rendered from the release statistics only.

Rendering is a pure function of the statistics, so the card check re-renders it from statistics
recomputed from the files and compares bytes: every number in the card then equals the data's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

FIGURES = (
    ("docs_per_bucket.png", "Documents per length bucket"),
    ("tokens_by_source.png", "Tokens by source"),
    ("source_mix.png", "Source mix across lengths"),
)


# The card's one line on two counts other length-bucketed cards report for text fixed after bucketing
REPAIR_NOTE = ("Repair runs before bucketing (lengths are counted on the repaired text), so no document is "
               "`out_of_range_after_fix` or moved to another bucket after repair: those counts do not apply.")


def size_category(n: int) -> str:
    """The Hub's size_categories value for n rows."""
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
                         (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M"), (1_000_000_000, "100M<n<1B")):
        if n < limit:
            return label
    return "n>1T" if n >= 10**12 else "1B<n<10B"


def hub_license(spdx: list[str]) -> str:
    """One Hub license id for the card: the sources' shared SPDX id lowercased, else `other`."""
    distinct = sorted(set(spdx))
    return distinct[0].lower() if len(distinct) == 1 else "other"


def front_matter(info: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    """Card metadata: pretty_name, language, license, task_categories, size_categories, tags, configs."""
    configs: list[dict[str, Any]] = [
        {"config_name": "default", "default": True, "data_files": [{"split": "train", "path": "data/*/*.parquet"}]}
    ]
    for b in data["buckets"]:
        if b["docs"]:
            configs.append(
                {"config_name": b["folder"], "data_files": [{"split": "train", "path": f"data/{b['folder']}/*.parquet"}]}
            )
    meta: dict[str, Any] = {"pretty_name": info["pretty_name"]}
    if info["languages"]:
        meta["language"] = list(info["languages"])
    meta["license"] = info["license"]
    meta["task_categories"] = list(info["task_categories"])
    meta["size_categories"] = [size_category(data["docs"])]
    meta["tags"] = list(info["tags"])
    meta["configs"] = configs
    return meta


def _n(x: int) -> str:
    return f"{x:,}"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def corpus_rows(corpus: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Headline rows of the whole corpus build (fetch, filters, dedup, PII, publish), from `info["corpus"]`."""
    rows = []
    if corpus.get("fetched") is not None:
        rows.append(("documents fetched", _n(corpus["fetched"])))
    rows += [(f"dropped by filter {k}", _n(v)) for k, v in corpus.get("filters", {}).items()]
    dedup = corpus.get("dedup", {})
    rows += [
        ("exact duplicates removed (corpus dedup)", _n(dedup.get("exact_dropped", 0))),
        ("near duplicates removed (corpus dedup)", _n(dedup.get("near_dropped", 0))),
        ("decontaminated (corpus dedup)", _n(dedup.get("decontaminated", 0))),
    ]
    pii = corpus.get("pii", {})
    if pii:
        detail = ", ".join(f"{k} {_n(v)}" for k, v in pii.items())
        rows.append(("PII placeholders", f"{_n(sum(pii.values()))} ({detail})"))
    rows.append(("documents published", _n(corpus.get("published", 0))))
    return rows


def _release_count(cleaning: list[dict[str, Any]], reason: str) -> int:
    return sum(r["count"] for r in cleaning if r["stage"] == "release" and r["reason"] == reason)


def headline_rows(info: dict[str, Any], data: dict[str, Any], cleaning: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The headline table as (label, value): the corpus build's counts, then the release's own."""
    return corpus_rows(info.get("corpus", {})) + [
        ("documents", _n(data["docs"])),
        (f"tokens ({info['tokenizer']})", _n(data["tokens"])),
        ("length range (tokens)", f"{_n(data['min_tokens_seen'])} to {_n(data['max_tokens_seen'])}"),
        ("documents per bucket", f"{_n(data['docs_per_bucket_min'])} to {_n(data['docs_per_bucket_max'])}"),
        ("buckets", _n(len(data["buckets"]))),
        ("sources", _n(data["n_sources"])),
        ("segments (cut from longer documents)", _n(data["segments"])),
        ("exact duplicates merged by the release", _n(_release_count(cleaning, "exact_duplicate"))),
        ("over per-source bucket cap (release)", _n(_release_count(cleaning, "over per-source bucket cap"))),
        ("version", info["version"]),
        ("build date", info["build_date"]),
    ]


def _compact(value: Any) -> str:
    """A settings value in one short cell: lists joined by commas, mappings as k=v."""
    if isinstance(value, Mapping):
        return " ".join(f"{k}={_compact(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ",".join(_compact(v) for v in value) or "none"
    return "null" if value is None else str(value)


def _cell(pairs: Mapping[str, Any]) -> str:
    return "; ".join(f"{k} {_compact(v)}" for k, v in pairs.items()).replace("|", "\\|") or "-"


def release_step(info: dict[str, Any], data: dict[str, Any], cleaning: list[dict[str, Any]]) -> dict[str, Any]:
    """The release's own Construction row: its counts come from the plan, so they are filled in here."""
    s = info["settings"]
    counts = {
        "documents in": info.get("corpus", {}).get("published", 0),
        "under min_tokens": _release_count(cleaning, "under min_tokens (after cleaning and repair)"),
        "exact duplicates merged": _release_count(cleaning, "exact_duplicate"),
        "over cap": _release_count(cleaning, "over per-source bucket cap"),
        "segments": data["segments"],
        "documents out": data["docs"],
    }
    settings = {"tokenizer": info["tokenizer"], "buckets": f"{s['min_tokens']}-{s['max_tokens']}/{s['bucket_width']}",
                "max_segments": s["max_segments"], "per_bucket_cap": s["per_bucket_cap"], "seed": s["seed"]}
    return {"stage": "release", "source": None,
            "code_version": info.get("build", {}).get("code_versions", {}).get("release", "-"),
            "counts": counts, "settings": settings}


def construction_lines(info: dict[str, Any], data: dict[str, Any], cleaning: list[dict[str, Any]]) -> list[str]:
    """The Construction section: one row per stage run (per source where the stage runs per source)."""
    steps = [*info.get("build", {}).get("steps", []), release_step(info, data, cleaning)]
    out = ["## Construction", "",
           "The stages as they ran, in order, from their stage records: what each counted, the settings that "
           "decided its output, and its code version. (Stage keys are left out: after ingest they hash the raw "
           "parts, which record their fetch time, so a refetch of the same bytes would change the card.)", "",
           "| step | source | counts | settings | code version |", "|---|---|---|---|---|"]
    for st in steps:
        counts = "; ".join(f"{k} {_n(int(v))}" for k, v in st["counts"].items()) or "-"
        out.append(f"| {st['stage']} | {st['source'] or 'all'} | {counts} | {_cell(st['settings'])} | "
                   f"{st['code_version']} |")
    return out


def reproduce_lines(info: dict[str, Any]) -> list[str]:
    """The Reproduce section: commands relative to the artifacts root and the hashes to check inputs against."""
    r = info.get("reproduce", {})
    ledger = r.get("ledger_ref") or "corpus/LEDGER.jsonl"
    versions = ", ".join(f"{k} {v}" for k, v in info.get("build", {}).get("code_versions", {}).items())
    out = ["## Reproduce", "",
           f"Paths are relative to the artifacts root. Put the ledger at `{ledger}` (its sha256 below) and run the "
           "whole build with a config whose resolved settings hash to the config sha256 below:", "",
           "```sh", f"pip install {r.get('package', 'corpus_dagster')}=={r.get('package_version', '')}",
           "python -m corpus_dagster.run <config>", "```", "",
           f"The release is then `{r.get('release_path') or 'release/<name>/<version>'}/`. Equal sources, ledger, "
           "config and code versions give the same documents; a new fetch records its own fetch time (the "
           "`created_at` column) and nothing else.", "",
           "| | |", "|---|---|",
           f"| config sha256 | `{r.get('config_sha256', '')}` |",
           f"| ledger | `{ledger}` |",
           f"| ledger sha256 | `{r.get('ledger_sha256', '')}` |",
           f"| package | {r.get('package', 'corpus_dagster')} {r.get('package_version', '')} |"]
    if versions:
        out.append(f"| code versions | {versions} |")
    return out


def render_card(info: dict[str, Any], data: dict[str, Any], cleaning: list[dict[str, Any]]) -> str:
    """README.md text. `info`: name, version, pretty_name, tokenizer, length_column, build_date, license,
    languages, task_categories, tags, settings (the release section), corpus (the build's counts), build
    (stage runs, release key, code versions), reproduce (hashes, ledger path, package); `cleaning`: rows of
    stage, reason, count."""
    meta = front_matter(info, data)
    col = info["length_column"]
    s = info["settings"]
    first = next((b["folder"] for b in data["buckets"] if b["docs"]), data["buckets"][0]["folder"])
    out = ["---", yaml.safe_dump(meta, sort_keys=False, allow_unicode=True).rstrip(), "---", ""]
    out += [f"# {info['pretty_name']}", ""]
    out += [
        f"Documents balanced by length for long-context training: {_n(len(data['buckets']))} buckets of "
        f"{_n(s['bucket_width'])} tokens from {_n(s['min_tokens'])} to {_n(s['max_tokens'])} tokens "
        f"({info['tokenizer']}, no special tokens). Documents longer than {_n(s['max_tokens'])} tokens are cut "
        f"into at most {s['max_segments']} segments at paragraph breaks; each source contributes at most "
        f"{_n(s['per_bucket_cap'])} documents per bucket (chosen with seed {s['seed']}).",
        "",
        "| | |",
        "|---|---|",
    ]
    out += [f"| {k} | {v} |" for k, v in headline_rows(info, data, cleaning)]
    out += ["", "## Usage", "", "```python", "from datasets import load_dataset", ""]
    out += [
        "# the whole release (run from the release folder, or prefix the paths with hf://datasets/<repo>/)",
        'ds = load_dataset("parquet", data_files="data/*/*.parquet", split="train")',
        "# one bucket",
        f'bucket = load_dataset("parquet", data_files="data/{first}/*.parquet", split="train")',
        "# a token range",
        f'short = ds.filter(lambda row: {s["min_tokens"]} <= row["{col}"] < {s["min_tokens"] + 2 * s["bucket_width"]})',
        "```",
        "",
        "## Schema",
        "",
        "| column | type | meaning |",
        "|---|---|---|",
        "| id | string | UUIDv5 of the document's stable key: `<source_id>:` and the ledger's `id_field` value, else its url (sources with a `url_field`), else the text's sha256 with its occurrence; a segment adds `#<start>-<end>`. Never a row position: stable across rebuilds, also when other records come or go upstream |",
        "| created_at | timestamp[us, UTC] | when the document was fetched |",
        "| source_type | string | the source's hub dataset, or its source id |",
        "| metadata | string | JSON: url (sources with a url field), title when known, license, source_file (relative to its ledger glob), cleaned (repairs applied), "
        "source_id, doc_id, kept source fields; segments add parent_id, segment, char_span |",
        "| content | string | the text |",
        f"| {col} | int32 | tokens of content ({info['tokenizer']}, no special tokens) |",
        "| tags | list<string> | empty by default |",
        "",
        "## Composition",
        "",
        "| source | hub dataset | category | docs | tokens | mean length (tokens) | segmented | license |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in data["sources"]:
        out.append(
            f"| {r['source_id']} | {r['hub_dataset']} | {r['category']} | {_n(r['docs'])} | {_n(r['tokens'])} | "
            f"{r['mean_tokens']:,.1f} | {_pct(r['segmented_share'])} | {r['license']} |"
        )
    out += ["", "![Tokens by source](assets/tokens_by_source.png)", "", "## Buckets", ""]
    out += ["| bucket | tokens range | docs | tokens | largest sources |", "|---|---|---|---|---|"]
    for b in data["buckets"]:
        top = ", ".join(f"{sid} {_pct(share)}" for sid, share in b["top_sources"])
        out.append(f"| {b['folder']} | {_n(b['low'])} to {_n(b['high'])} | {_n(b['docs'])} | {_n(b['tokens'])} | {top} |")
    out += ["", "![Documents per length bucket](assets/docs_per_bucket.png)", ""]
    out += ["![Source mix across lengths](assets/source_mix.png)", "", "## Cleaning", ""]
    out += ["| stage | reason | documents |", "|---|---|---|"]
    out += [f"| {r['stage']} | {r['reason']} | {_n(r['count'])} |" for r in cleaning]
    out += ["", REPAIR_NOTE, ""]
    out += construction_lines(info, data, cleaning)
    out += [""] + reproduce_lines(info)
    out += [
        "",
        "## Limitations",
        "",
        "- Lengths are counted with one tokenizer; another tokenizer puts documents in other buckets.",
        "- Segments are cut at paragraph (else line, sentence, word) breaks without regard to meaning; "
        "text after the last segment is dropped.",
        "- Per-source caps and the shuffle are seeded: another seed selects other documents.",
        "- Exact duplicates are removed; near duplicates were removed upstream at the configured Jaccard "
        "threshold, and some remain.",
        "- PII was replaced by placeholders (<EMAIL>, <PHONE>, <CARD>, <IP>, <KEY>) by pattern matching, "
        "which misses some and hits some false positives.",
        "- Licenses are per source as recorded in the ledger; check them before use.",
        "",
    ]
    return "\n".join(out)
