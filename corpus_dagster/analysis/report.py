"""REPORT.md: headline numbers with their thresholds and tokenizer, the two views, the figures."""

from __future__ import annotations

from typing import Any

from corpus_dagster.core.settings import AnalysisSettings
from corpus_dagster.lib.near_graph import GraphSpec


def _pct(x: float) -> str:
    return f"{x:.2f}%"


def render_report(
    *,
    cfg: AnalysisSettings,
    spec: GraphSpec,
    views: list[dict[str, Any]],
    lengths: list[dict[str, Any]],
    stats: dict[str, dict[str, Any]],
    figures: list[str],
    duplicates_dir: str,
) -> str:
    """The report as Markdown (figures linked by relative path)."""
    scan = stats["scan"]
    overall = [v for v in views if v["scope"] == "overall"]
    lines = ["# Corpus analysis report", ""]
    lines += [
        f"- Documents: {scan['docs']:,} in {scan['files']} file(s), {scan['text_bytes']:,} bytes of UTF-8 text.",
        f"- Documents with fewer than {spec.shingle_size} normalized words (no shingles; only exact "
        f"duplication can see them): {scan['no_shingle_docs']:,}.",
        f"- Near duplicates: exact Jaccard over sets of normalized {spec.shingle_size}-word shingles; "
        f"candidates from MinHash LSH with {spec.bands} bands x {spec.rows} rows, every pair of a bucket (a pair "
        f"at Jaccard {cfg.pair_threshold} becomes a candidate with probability "
        f"{stats['candidates']['p_candidate_at_pair_threshold']}); every reported Jaccard is exact, never estimated."
        + (f" The pairs are the near-duplicate graph's that dedup verified (at Jaccard >= {spec.threshold}): "
           "each pair was scored once for both." if "graph_pairs" in stats["candidates"] else ""),
        "",
        "## Headline",
        "",
    ]
    for v in overall:
        name = "exact (byte-identical)" if v["view"] == "exact" else f"Jaccard >= {v['view']}"
        lines.append(
            f"- {name}: **{_pct(v['affected_pct'])} affected**, **{_pct(v['removable_pct'])} removable**."
        )
    lines += [
        "",
        "Two views, never conflated. *Affected*: documents that have at least one duplicate (both twins "
        "count). *Removable*: documents that could be deleted keeping one per cluster. The gap is named: "
        "kept representatives (one per cluster) plus stranded documents (they have a duplicate, but greedy "
        "complete-linkage left them alone in their cluster). Complete-linkage clusters are assigned "
        "greedily in id order, so **removal rates are lower bounds**.",
        "",
        "## Affected vs removable",
        "",
        "| scope | view | docs | affected | removable | kept representatives | stranded | affected % | removable % | no-shingle docs |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for v in views:
        scope = "overall" if v["scope"] == "overall" else v["source_id"]
        lines.append(
            f"| {scope} | {v['view']} | {v['docs']:,} | {v['affected']:,} | {v['removable']:,} | "
            f"{v['kept_representatives']:,} | {v['stranded']:,} | {_pct(v['affected_pct'])} | "
            f"{_pct(v['removable_pct'])} | {v['no_shingle_docs']:,} |"
        )
    cl = stats["clusters"]
    lines += ["", "## Clusters", ""]
    for t in cfg.cluster_thresholds:
        tg = f"t{round(t * 100):02d}"
        lines.append(
            f"- Jaccard >= {t}: {cl[f'clusters_{tg}']:,} clusters (largest {cl[f'largest_cluster_{tg}']:,} "
            f"documents), `near_dup_clusters_{tg}.jsonl`."
        )
    jc = stats["jaccard"]
    lines += [
        f"- Exact groups: {stats['exact']['exact_groups']:,} (`duplicate_groups.jsonl`).",
        f"- {'Graph pairs' if 'graph_pairs' in stats['candidates'] else 'Candidate pairs'} "
        f"{stats['candidates'].get('graph_pairs', jc['candidate_pairs']):,}, of which {jc['verified_pairs']:,} "
        f"at exact Jaccard >= "
        f"{cfg.pair_threshold} (`{duplicates_dir}/`: {stats['duplicates']['rows']:,} documents).",
        "",
        "## Token lengths",
        "",
        "Counts are text tokens (no BOS/EOD); the tokenizer stands beside every number.",
        "",
        "| tokenizer | scope | key | docs | p1 | p5 | p25 | p50 | p75 | p95 | p99 | max | mean | total |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in lengths:
        ps = " | ".join(f"{r[f'p{p}']:.0f}" for p in (1, 5, 25, 50, 75, 95, 99))
        lines.append(
            f"| {r['tokenizer']} | {r['scope']} | {r['key']} | {r['docs']:,} | {ps} | {r['max']:,} | "
            f"{r['mean']:.1f} | {r['total']:,} |"
        )
    lines += ["", "## Figures", ""]
    for f in figures:
        lines += [f"![{f}]({f})", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def dataset_card(*, duplicates_dir: str, clusters: list[tuple[str, float, int]], groups_file: str,
                 duplicate_rows: int, groups: int, pair_threshold: float, shingle_size: int) -> str:
    """README.md of the near_dup/ dataset folder: YAML front matter naming one config per table (what
    `datasets.load_dataset` and the Hub viewer read), then what each table holds.

    clusters: (file name, threshold, clusters) per cluster file."""
    def config(name: str, path: str, default: bool = False) -> list[str]:
        lines = [f"- config_name: {name}", "  data_files:", "  - split: train", f"    path: {path}"]
        return lines + (["  default: true"] if default else [])

    front = ["---", "configs:"]
    front += config(duplicates_dir, f"{duplicates_dir}/*.parquet", default=True)
    for name, _, _ in clusters:
        front += config(name.removesuffix(".jsonl"), name)
    front += config(groups_file.removesuffix(".jsonl"), groups_file)
    front += ["---", ""]
    body = [
        "# Near-duplicate tables",
        "",
        f"Exact and near duplicates of the analysed corpus: Jaccard over sets of normalized {shingle_size}-word "
        "shingles, computed exactly for every MinHash LSH candidate (never estimated). Copies of the analysis "
        "tables beside this folder; one config per table.",
        "",
        "| config | file(s) | rows | what |",
        "|---|---|---|---|",
        f"| `{duplicates_dir}` | `{duplicates_dir}/*.parquet` | {duplicate_rows:,} | one row per document with a "
        f"duplicate: `doc_id`, `exact_duplicates`, `near_duplicates` (`doc_id`, `jaccard` float32 rounded up, "
        f"`intersection`, `union`; Jaccard >= {pair_threshold}), `n_exact`, `n_near` |",
    ]
    for name, threshold, n in clusters:
        body.append(f"| `{name.removesuffix('.jsonl')}` | `{name}` | {n:,} | complete-linkage clusters, every pair "
                    f"at Jaccard >= {threshold}: `component`, `size`, `doc_ids`, `min_jaccard`, `mean_jaccard` |")
    body.append(f"| `{groups_file.removesuffix('.jsonl')}` | `{groups_file}` | {groups:,} | byte-identical groups: "
                "`doc_ids` |")
    body += [
        "",
        "```python",
        "import datasets",
        f'dups = datasets.load_dataset("parquet", data_files="near_dup/{duplicates_dir}/*.parquet", split="train")',
        f'clusters = datasets.load_dataset("json", data_files="near_dup/{clusters[0][0] if clusters else groups_file}", '
        'split="train")',
        "```",
        "",
        "A stricter Jaccard threshold is a filter on the integers: keep `intersection * 100 >= 75 * union` for 0.75.",
        "",
    ]
    return "\n".join(front + body)
