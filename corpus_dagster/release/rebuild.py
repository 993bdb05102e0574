"""The release's reproducibility checks: a rebuild with another worker count must give the same bytes,
either everything into a temp folder (`check_rebuild`) or a seeded sample of units, parts and figures plus
the plan, README.md and _RELEASE.json (`check_rebuild_sample`)."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from corpus_dagster.core.checks import CheckReport, report_of, sample_units
from corpus_dagster.core.hashing import sha256_file
from corpus_dagster.core.parallel import ordered_map
from corpus_dagster.release import card as card_mod
from corpus_dagster.release.build import (
    STATS_NAME,
    build_release,
    part_path,
    plan_build,
    record_bytes,
    release_record,
    scatter_write,
    write_card,
)
from corpus_dagster.release.checks import check_identical
from corpus_dagster.release.created import created_bytes, read_created
from corpus_dagster.release.inputs import read_inputs
from corpus_dagster.release.jobs import count_job, segment_job
from corpus_dagster.release.plan import room_by_source
from corpus_dagster.release.reproduce import REPRODUCE_FILES, write_reproduce
from corpus_dagster.release.units import (
    read_units,
    segment_batches,
    uncounted_rows,
    unit_line,
    unit_record,
    with_counts,
    work_units,
)


def file_hashes(folder: str | Path) -> dict[str, str]:
    """SHA-256 of every file under `folder`, by relative path (sorted)."""
    folder = Path(folder)
    return {
        str(p.relative_to(folder)): sha256_file(p)
        for p in sorted(folder.rglob("*")) if p.is_file()
    }


def check_rebuild(release_dir: str | Path, build_kwargs: Mapping[str, Any], workers: int) -> CheckReport:
    """Rebuild with `workers` into a temp folder and compare every file's bytes with `release_dir`."""
    release_dir = Path(release_dir)
    with tempfile.TemporaryDirectory(prefix="release-rebuild-") as tmp:
        kwargs = dict(build_kwargs) | {"out_dir": Path(tmp) / "release", "workers": workers, "units_file": None}
        build_release(**kwargs)
        return check_identical(file_hashes(release_dir), file_hashes(Path(tmp) / "release"))


def check_rebuild_sample(release_dir: str | Path, build_kwargs: Mapping[str, Any], workers: int, units_file: str | Path,
                         units_sha256: str | None, sample: int, seed: str) -> CheckReport:
    """Rebuild a seeded sample of the release with `workers` and compare bytes; `sample` 0 rebuilds everything.

    A unit is a run of up to UNIT_DOCS documents of one input shard with work for the worker processes
    (a token count the release computes, segments of a document over max_tokens); the build records each
    unit's counts and segments in `units_file`. With `sample` n > 0:
    - n units are recomputed, one job each, through a pool of `workers` and must equal the build's units;
    - the whole plan (buckets, duplicates, caps, shuffle, parts) is recomputed from the inputs and the
      build's units, and the set of part files must be the planned one;
    - n output files drawn from the part files and the three figures are written again (parts through the
      scatter and write jobs with `workers`) and compared byte for byte;
    - README.md and _RELEASE.json are rendered again from the recomputed plan and compared byte for byte
      (_RELEASE.json holds every part's sha256: the rewritten parts' from the rebuild, the others' from
      their files).
    Draws are seeded by `seed` (the stage key: a new build checks other units); `sample` 0 runs the full
    rebuild (`check_rebuild`), what a scheduled full check runs."""
    release_dir = Path(release_dir)
    if sample <= 0:
        full = check_rebuild(release_dir, build_kwargs, workers)
        full.metadata["mode"] = "full"
        return full
    units, why = read_units(Path(units_file), units_sha256)
    if units is None:
        return report_of([str(why)], mode="sample")
    kw = dict(build_kwargs)
    settings = kw["settings"]
    inp = read_inputs(Path(kw["shards_dir"]), settings, kw["tokenize_cfg"], kw["sources"], kw.get("token_counts"),
                      kw.get("doc_info", ()))
    problems: list[str] = []

    def shard_name(s: int) -> str:
        return inp.paths[s].name

    counted: dict[int, dict[int, int]] = {}
    for u in units:
        counted.setdefault(int(u["shard"]), {}).update(zip(u["counted"]["rows"], u["counted"]["n_tokens"], strict=True))
    uncounted = {(s, r) for s, rows in uncounted_rows(inp.docs) for r in rows}
    if uncounted != {(s, r) for s, c in counted.items() for r in c}:
        return report_of([f"{units_file}: the documents the build counted are not the documents without a "
                           "reusable count"], mode="sample")
    docs = with_counts(inp.docs, counted)
    work = work_units(docs, counted, inp.buckets)
    if work != [(int(u["shard"]), u["rows"]) for u in units]:
        return report_of([f"{units_file}: {len(units)} units recorded, the inputs make {len(work)} (or other rows)"],
                         mode="sample")
    picks = sample_units(len(work), sample, f"{seed}:units")
    recount = [i for i in picks if units[i]["counted"]["rows"]]
    jobs = [(str(inp.paths[work[i][0]]), units[i]["counted"]["rows"], inp.cfg) for i in recount]
    recounted = {i: dict(zip(units[i]["counted"]["rows"], cnts, strict=True))
                 for i, (cnts, _, _) in zip(recount, ordered_map(count_job, jobs, workers), strict=True)}
    room = room_by_source(docs, inp.buckets, settings)
    batches = segment_batches(docs, [work[i] for i in picks], inp.buckets, room)

    created = read_created(kw["created_at_file"]) if kw.get("created_at_file") is not None else None
    plan, plan_counts, parts = plan_build(inp, docs, units, settings, kw.get("doc_info", ()), created)
    part_files = [part_path(inp.buckets, b, p) for b, p, _ in parts]
    figures = [f"assets/{f}" for f, _ in card_mod.FIGURES]
    outputs = part_files + figures
    reproduce = REPRODUCE_FILES if kw.get("reproduce_settings") is not None else []
    expected = set(outputs) | {"README.md", STATS_NAME, *reproduce}
    on_disk = {str(p.relative_to(release_dir)) for p in release_dir.rglob("*") if p.is_file()}
    problems += [f"{f}: missing in release" for f in sorted(expected - on_disk)]
    problems += [f"{f}: not in the rebuilt plan" for f in sorted(on_disk - expected)]
    drawn = sample_units(len(outputs), sample, f"{seed}:outputs")
    part_picks = [i for i in drawn if i < len(parts)]
    fig_picks = [outputs[i] for i in drawn if i >= len(parts)]

    # the jobs read their shards' row groups themselves, as the build's do: the sampled parts' texts
    # from every shard at once were 1.5 GB in this process at 10x the bench corpus
    jobs = [(str(inp.paths[work[i][0]]), [b], settings, inp.cfg) for i, b in zip(picks, batches, strict=True)]
    for i, res in zip(picks, ordered_map(segment_job, jobs, workers), strict=True):
        s, rows = work[i]
        again = unit_record(s, rows, recounted.get(i, {}), res["batches"][0])
        if unit_line(again) != unit_line(units[i]):
            problems.append(f"{shard_name(s)}: rows {rows[0]}..{rows[-1]}: counts or segments differ from a rebuild "
                            f"with workers={workers}")
    with tempfile.TemporaryDirectory(prefix="release-rebuild-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "spill").mkdir()
        written, _, _ = scatter_write(plan, parts, inp, settings, tmp / "spill", tmp / "out", workers,
                                      only=part_picks)
        digests = {f["path"]: f["sha256"] for f in written}
        files = []
        for rel, (_, _, rows) in zip(part_files, parts, strict=True):
            here = release_dir / rel
            digest = digests.get(rel) or (sha256_file(here) if here.is_file() else "")
            files.append({"path": rel, "rows": rows, "sha256": digest})
        record = release_record(inp, settings, plan, plan_counts, units, kw.get("selection_excluded"), files, kw.get("build"))
        write_card(tmp / "out", record, figures={Path(f).name for f in fig_picks})
        (tmp / "out" / STATS_NAME).write_bytes(record_bytes(record))
        if reproduce:
            rows = [s.to_json() if hasattr(s, "to_json") else dict(s) for s in kw["sources"]]
            write_reproduce(tmp / "out", kw["reproduce_settings"], rows, created_bytes(plan))
        for rel in [*(part_files[i] for i in part_picks), *fig_picks, "README.md", STATS_NAME, *reproduce]:
            here = release_dir / rel
            if here.is_file() and sha256_file(here) != sha256_file(tmp / "out" / rel):
                problems.append(f"{rel}: bytes differ from a rebuild with workers={workers}")
    return report_of(problems, mode="sample", units_rebuilt=len(picks), units=len(work),
                     parts_rewritten=len(part_picks), parts=len(parts), figures_redrawn=len(fig_picks),
                     files=len(expected))
