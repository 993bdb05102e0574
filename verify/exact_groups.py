"""Count exact-duplicate groups by hashing the corpus directly and compare with duplicate_groups.jsonl.

    python verify/exact_groups.py --corpus-dir DIR --out-dir OUT     # the analysis's own arguments
    python verify/exact_groups.py --corpus-dir DIR --groups OUT/duplicate_groups.jsonl
    python -m corpus_dagster.verify.exact_groups --out-dir OUT        # the installed package
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python verify/<name>.py
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _inputs import add_arguments, require, resolve_inputs  # noqa: E402
    from _reference import iter_documents  # noqa: E402
else:  # imported as verify.<name> (a checkout) or corpus_dagster.verify.<name> (the installed wheel)
    from ._inputs import add_arguments, require, resolve_inputs  # noqa: E402
    from ._reference import iter_documents  # noqa: E402


def check_exact_groups(files: list[Path], groups_file: str | Path) -> dict:
    """The groups of byte-identical texts (SHA-256 of the UTF-8 bytes) equal the file's, count and members."""
    by_digest: dict[bytes, list[str]] = {}
    docs = 0
    for doc_id, utf8 in iter_documents(files, utf8=True):
        by_digest.setdefault(hashlib.sha256(utf8).digest(), []).append(doc_id)
        docs += 1
    truth = {frozenset(ids) for ids in by_digest.values() if len(ids) > 1}
    lines = [json.loads(x) for x in Path(groups_file).read_text(encoding="utf-8").splitlines() if x]
    reported = {frozenset(x["doc_ids"]) for x in lines}
    failures = []
    if len(lines) != len(truth):
        failures.append(f"{len(lines)} groups reported, {len(truth)} found by hashing the corpus")
    for g in sorted(reported - truth, key=sorted)[:5]:
        failures.append(f"reported group is not a group of identical texts: {sorted(g)[:4]}")
    for g in sorted(truth - reported, key=sorted)[:5]:
        failures.append(f"group of identical texts missing from the file: {sorted(g)[:4]}")
    return {"passed": not failures, "docs": docs, "groups": len(truth), "reported": len(lines),
            "failures": failures}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(p)
    p.add_argument("--groups", help="duplicate_groups.jsonl (default: the out dir's)")
    a = p.parse_args(argv)
    require(a, p)
    if a.groups is None and a.out_dir is None:
        p.error("--groups is needed without --out-dir")
    inputs = resolve_inputs(a.corpus_dir, a.out_dir, a.exclude)
    groups = a.groups or Path(a.out_dir) / inputs.settings.get("groups", "duplicate_groups.jsonl")
    res = check_exact_groups(inputs.files, groups)
    failures = inputs.failures + res["failures"]
    verdict = "PASS" if not failures else "FAIL"
    print(f"{verdict}: {res['docs']} documents in {len(inputs.files)} file(s), {res['groups']} exact groups found, "
          f"{res['reported']} reported")
    for f in failures:
        print(f"  {f}")
    return 0 if not failures else 1

if __name__ == "__main__":
    sys.exit(main())
