"""The dataset card (README.md with YAML front matter), rendered from the release statistics only.

Rendering is a pure function of the statistics, so the card check re-renders it from statistics
recomputed from the files and compares bytes: every number in the card then equals the data's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import yaml

EXAMPLE_CHARS = 600  # characters of the example row's content shown in the card
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


def _count_rows(pairs: list[tuple[str, int]]) -> list[tuple[str, str]]:
    """(label, count) rows whose count is above 0, formatted."""
    return [(label, _n(int(v))) for label, v in pairs if int(v) > 0]


def corpus_rows(corpus: Mapping[str, Any], cleaning: list[dict[str, Any]] | None = None) -> list[tuple[str, str]]:
    """The corpus build's table, in the order it ran: what was fetched, what the ledger's `where` left out
    (once, per source, outside the fetched count), what each rule dropped or repaired (only counts above 0,
    so a disabled rule or one that dropped nothing has no row), dedup, PII, published."""
    rows = []
    if corpus.get("fetched") is not None:
        rows.append(("documents fetched (after the ledger's where)", _n(corpus["fetched"])))
    rows += _count_rows([(f"left out by where ({r['reason'][7:-1]})", r["count"]) for r in cleaning or []
                         if r["stage"] == "ingest" and r["reason"].startswith("where (")])
    rows += _count_rows([(f"dropped by filter {k}", v) for k, v in corpus.get("filters", {}).items()])
    rows += _count_rows([(f"repaired {k} (kept)", v) for k, v in corpus.get("repairs", {}).items()])
    dedup = corpus.get("dedup", {})
    rows += _count_rows([("exact duplicates removed (corpus dedup)", dedup.get("exact_dropped", 0)),
                         ("near duplicates removed (corpus dedup)", dedup.get("near_dropped", 0)),
                         ("decontaminated (corpus dedup)", dedup.get("decontaminated", 0))])
    pii = corpus.get("pii", {})
    if sum(pii.values()):
        detail = ", ".join(f"{k} {_n(v)}" for k, v in pii.items() if v)
        rows.append(("PII placeholders inserted", f"{_n(sum(pii.values()))} ({detail})"))
    rows.append(("documents published", _n(corpus.get("published", 0))))
    return rows


def _release_count(cleaning: list[dict[str, Any]], reason: str) -> int:
    return sum(r["count"] for r in cleaning if r["stage"] == "release" and r["reason"] == reason)


def headline_rows(info: dict[str, Any], data: dict[str, Any], cleaning: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The release's table as (label, value): what it holds, then what it left out (counts above 0)."""
    filled = sum(1 for b in data["buckets"] if b["docs"])
    rows = [
        ("documents", _n(data["docs"])),
        (f"tokens ({info['tokenizer']})", _n(data["tokens"])),
        ("length range (tokens)", f"{_n(data['min_tokens_seen'])} to {_n(data['max_tokens_seen'])}"),
        ("documents per bucket", f"{_n(data['docs_per_bucket_min'])} to {_n(data['docs_per_bucket_max'])}"),
        ("buckets with documents", f"{_n(filled)} of {_n(len(data['buckets']))}"),
        ("sources", _n(data["n_sources"])),
        ("segments (cut from longer documents)", _n(data["segments"])),
    ]
    rows += _count_rows([(f"left out: {r['reason']}", r["count"]) for r in cleaning if r["stage"] == "release"])
    return rows + [("version", info["version"]), ("build date", info["build_date"])]


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
    """Data Collection and Processing: one row per stage run (per source where the stage runs per source);
    a count of 0 beyond a row's first is left out (a source without `where` has no `excluded by where`)."""
    steps = [*info.get("build", {}).get("steps", []), release_step(info, data, cleaning)]
    out = ["### Data Collection and Processing", "",
           "The stages as they ran, in order, from their stage records: what each counted, the settings that "
           "decided its output, and its code version. (Stage keys are left out: after ingest they hash the raw "
           "parts, which record their fetch time, so a refetch of the same bytes would change the card.)", "",
           "| step | source | counts | settings | code version |", "|---|---|---|---|---|"]
    for st in steps:
        items = list(st["counts"].items())
        shown = items[:1] + [(k, v) for k, v in items[1:] if int(v)]
        counts = "; ".join(f"{k} {_n(int(v))}" for k, v in shown) or "-"
        out.append(f"| {st['stage']} | {st['source'] or 'all'} | {counts} | {_cell(st['settings'])} | "
                   f"{st['code_version']} |")
    return out


def reproduce_lines(info: dict[str, Any]) -> list[str]:
    """The Reproduce section: the command that rebuilds the release from `reproduce/` (the config without
    `paths`, the ledger with local paths reduced to names under sources/<source_id>/), and the hashes."""
    r = info.get("reproduce", {})
    name = r.get("release_path") or "release/<name>/<version>"
    versions = ", ".join(f"{k} {v}" for k, v in info.get("build", {}).get("code_versions", {}).items())
    out = ["## Reproduce", "",
           "`reproduce/` holds the resolved config without its `paths` (no artifacts root, mirror, storage "
           "options or secret) and the ledger, pins kept; a local source's files are named under "
           "`sources/<source_id>/` relative to their glob, and remote sources keep their URLs. From a copy of "
           "this folder, put the local sources' files there, point `paths` at your own folder and run:", "",
           "```sh", f"pip install {r.get('package', 'corpus_dagster')}=={r.get('package_version', '')}",
           "cp reproduce/config.yaml my-build.yaml",
           "printf 'paths:\\n  artifacts: ./artifacts\\n  ledger: reproduce/LEDGER.jsonl\\n' >> my-build.yaml",
           f"mkdir -p artifacts/{name.rsplit('/', 1)[0]} && cp reproduce/_CREATED_AT.parquet "
           f"artifacts/{name.rsplit('/', 1)[0]}/",
           "python -m corpus_dagster.run my-build.yaml", "```", "",
           f"The release is then `artifacts/{name}/`. Equal sources, config and code versions give the same "
           "documents; the copied `_CREATED_AT.parquet` gives every content the `created_at` of this release "
           "(without it each row takes its own fetch time, and nothing else changes).", "",
           "| | |", "|---|---|",
           f"| config sha256 | `{r.get('config_sha256', '')}` |",
           f"| ledger | `{r.get('ledger_ref') or 'corpus/LEDGER.jsonl'}` |",
           f"| ledger sha256 | `{r.get('ledger_sha256', '')}` |",
           f"| package | {r.get('package', 'corpus_dagster')} {r.get('package_version', '')} |"]
    if versions:
        out.append(f"| code versions | {versions} |")
    return out


def _md_escape(text: str) -> str:
    """Text shown in a table cell or a line: pipes and markup characters escaped, newlines as spaces."""
    for ch in "\\`*_[]<>|":
        text = text.replace(ch, "\\" + ch)
    return " ".join(text.split())


def source_line(sid: str, fact: Mapping[str, Any]) -> str:
    """One bullet of the summary: the source (linked when it has a link), its category and description."""
    link = fact.get("link")
    label = f"[{sid}]({link})" if link else f"`{sid}`"
    category = f" ({_md_escape(fact['category'])})" if fact.get("category") else ""
    description = fact.get("description") or "no description in the ledger"
    return f"- **{label}**{category}: {_md_escape(description)}"


def example_lines(example: Mapping[str, Any] | None, col: str) -> list[str]:
    """Data Instances: one release row as JSON (its content cut to EXAMPLE_CHARS, the cut said)."""
    if not example:
        return ["No example: the release is empty."]
    row = dict(example)
    content = row.pop("content")
    n = int(row.pop("content_chars"))
    shown = content if n <= EXAMPLE_CHARS else content[:EXAMPLE_CHARS] + f" [... {n - EXAMPLE_CHARS:,} more characters]"
    body = {"id": row["id"], "created_at": row["created_at"], "source_type": row["source_type"],
            "metadata": row["metadata"], "content": shown, col: row["length"], "tags": []}
    text = json.dumps(body, ensure_ascii=False, indent=2).replace("```", "`\u200b``")
    return [f"The first row of the first part of the first bucket (`created_at` by its day, `content` at most "
            f"{EXAMPLE_CHARS:,} characters):", "",
            "```json", text, "```"]


def bucket_lines(data: dict[str, Any]) -> list[str]:
    """The buckets with documents, one row each; the empty ones folded into one line."""
    out = ["| bucket | tokens range | docs | tokens | largest sources |", "|---|---|---|---|---|"]
    for b in data["buckets"]:
        if b["docs"]:
            top = ", ".join(f"{sid} {_pct(share)}" for sid, share in b["top_sources"])
            out.append(f"| {b['folder']} | {_n(b['low'])} to {_n(b['high'])} | {_n(b['docs'])} | {_n(b['tokens'])} | {top} |")
    empty = [b for b in data["buckets"] if not b["docs"]]
    if empty:
        spans = [f"{_n(b['low'])}-{_n(b['high'])}" for b in empty]
        out += ["", f"{_n(len(empty))} of {_n(len(data['buckets']))} buckets hold no document "
                f"(tokens {', '.join(spans)}) and have no folder or config."]
    return out


def pii_lines(info: dict[str, Any]) -> list[str]:
    """Personal and Sensitive Information: what the PII stage did, with its counts per type."""
    corpus = info.get("corpus", {})
    pii = corpus.get("pii", {})
    redacted = corpus.get("docs_redacted")
    placeholders = {"emails": "<EMAIL>", "phones": "<PHONE>", "cards": "<CARD>", "ips": "<IP>", "keys": "<KEY>"}
    out = ["### Personal and Sensitive Information", "",
           "Before publishing, every document passed the PII stage, which replaces each match of its detectors with "
           "a placeholder: e-mail addresses, phone numbers, payment card numbers (checksum-valid), IP addresses and "
           "secret keys or tokens. Detection is by pattern, validity and cue words: it misses some and replaces "
           "some false positives; names, postal addresses and other personal data are not detected.", ""]
    if redacted is not None:
        out += [f"Documents with at least one placeholder: {_n(int(redacted))} of {_n(int(corpus.get('published', 0)))} "
                "published.", ""]
    out += ["| type | placeholder | replaced |", "|---|---|---|"]
    out += [f"| {k} | `{placeholders.get(k, k)}` | {_n(int(v))} |" for k, v in pii.items()]
    return out


def citation_lines(info: dict[str, Any]) -> list[str]:
    """The Citation section: the configured BibTeX (release.citation), else what to fill."""
    citation = (info.get("citation") or "").strip()
    if not citation:
        return ["## Citation", "",
                "No citation is configured. Set `release.citation` in the config to a BibTeX entry for this "
                "dataset (title, authors, year, URL of its Hub page) and rebuild; cite each source as its own "
                "card asks (see Dataset Summary)."]
    return ["## Citation", "", "```bibtex", citation.replace("```", "`\u200b``"), "```"]


def tokenizer_line(info: dict[str, Any]) -> str:
    """The tokenizer that counted the lengths: its name, family and the sha256 of its vocabulary."""
    kind = info.get("tokenizer_kind")
    digest = info.get("tokenizer_sha256")
    what = f"`{info['tokenizer']}`" + (f" ({kind})" if kind else "")
    sha = f", sha256 `{digest}` of its vocabulary (tokenizer.json, or the tiktoken ranks file)" if digest else ""
    return f"Lengths are counted with the tokenizer {what}{sha}, without special tokens."


def render_card(info: dict[str, Any], data: dict[str, Any], cleaning: list[dict[str, Any]]) -> str:
    """README.md text, in the order of the Hub's dataset card template. `info`: name, version, pretty_name,
    tokenizer (its kind and sha256), length_column, build_date, license, languages, task_categories, tags,
    settings (the release section), sources (ledger facts with links and descriptions), example (one row),
    citation, corpus (the build's counts), build (stage runs, code versions), reproduce (hashes, package);
    `cleaning`: rows of stage, reason, count."""
    meta = front_matter(info, data)
    col = info["length_column"]
    s = info["settings"]
    first = next((b["folder"] for b in data["buckets"] if b["docs"]), data["buckets"][0]["folder"])
    facts = info.get("sources", {})
    out = ["---", yaml.safe_dump(meta, sort_keys=False, allow_unicode=True).rstrip(), "---", ""]
    out += [f"# {info['pretty_name']}", "", "## Dataset Summary", ""]
    out += [
        f"Documents balanced by length for long-context training: {_n(len(data['buckets']))} buckets of "
        f"{_n(s['bucket_width'])} tokens from {_n(s['min_tokens'])} to {_n(s['max_tokens'])} tokens. Documents "
        f"longer than {_n(s['max_tokens'])} tokens are cut into at most {s['max_segments']} segments at paragraph "
        f"breaks; each source contributes at most {_n(s['per_bucket_cap'])} documents per bucket (chosen with "
        f"seed {s['seed']}). {tokenizer_line(info)}",
        "",
        "Sources:",
        "",
    ]
    out += [source_line(r["source_id"], facts.get(r["source_id"], {})) for r in data["sources"]]
    out += ["", "### The release", "", "| | |", "|---|---|"]
    out += [f"| {k} | {v} |" for k, v in headline_rows(info, data, cleaning)]
    out += ["", "### The corpus build it was cut from", "", "| step | documents |", "|---|---|"]
    out += [f"| {k} | {v} |" for k, v in corpus_rows({**info.get("corpus", {})}, cleaning)]
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
        "## Dataset Structure",
        "",
        "### Data Instances",
        "",
        *example_lines(info.get("example"), col),
        "",
        "### Data Fields",
        "",
        "| column | type | meaning |",
        "|---|---|---|",
        "| id | string | UUIDv5 of the document's stable key: `<source_id>:` and the ledger's `id_field` value, else its url (sources with a `url_field`), else the text's sha256 with its occurrence; a segment adds `#<start>-<end>`. Never a row position: stable across rebuilds, also when other records come or go upstream |",
        "| created_at | timestamp[us, UTC] | when this content first entered the release: the fetch time of the build that first released it, kept by content hash, so an unchanged row keeps it in every later build |",
        "| source_type | string | the source's hub dataset, or its source id |",
        "| metadata | string | JSON: url (sources with a url field), title when known, license, source_file (relative to its ledger glob), cleaned (repairs applied), "
        "source_id, doc_id, kept source fields; segments add parent_id, segment, char_span |",
        "| content | string | the text |",
        f"| {col} | int32 | tokens of content ({info['tokenizer']}, no special tokens) |",
        "| tags | list<string> | empty by default |",
        "",
        "### Buckets",
        "",
        "Each bucket is a folder of `data/` and a config of the dataset (one split, `train`).",
        "",
    ]
    out += bucket_lines(data)
    out += ["", "![Documents per length bucket](assets/docs_per_bucket.png)", ""]
    out += ["![Source mix across lengths](assets/source_mix.png)", "", "## Dataset Creation", "",
            "### Source Data", ""]
    out += ["| source | link | category | docs | tokens | mean length (tokens) | segmented | license |",
            "|---|---|---|---|---|---|---|---|"]
    for r in data["sources"]:
        link = facts.get(r["source_id"], {}).get("link")
        shown = f"[{r['hub_dataset'] if r['hub_dataset'] != r['source_id'] else 'link'}]({link})" if link else "-"
        out.append(
            f"| {r['source_id']} | {shown} | {r['category']} | {_n(r['docs'])} | {_n(r['tokens'])} | "
            f"{r['mean_tokens']:,.1f} | {_pct(r['segmented_share'])} | {r['license']} |"
        )
    out += ["", "![Tokens by source](assets/tokens_by_source.png)", ""]
    out += construction_lines(info, data, cleaning)
    out += ["", REPAIR_NOTE, ""]
    out += pii_lines(info)
    out += [""] + reproduce_lines(info)
    out += [
        "",
        "## Considerations for Using the Data",
        "",
        "- Lengths are counted with one tokenizer; another tokenizer puts documents in other buckets.",
        "- Segments are cut at paragraph (else line, sentence, word) breaks without regard to meaning; "
        "text after the last segment is dropped.",
        "- Per-source caps and the shuffle are seeded: another seed selects other documents.",
        "- Exact duplicates are removed; near duplicates were removed upstream at the configured Jaccard "
        "threshold, and some remain.",
        "- PII was replaced by placeholders by pattern matching (see Personal and Sensitive Information).",
        "",
        "## Licensing Information",
        "",
        f"Card license: `{info['license']}`. Licenses are per source as recorded in the ledger (Source Data "
        "table); check them, and each source's own terms, before use.",
        "",
    ]
    out += citation_lines(info)
    out.append("")
    return "\n".join(out)
