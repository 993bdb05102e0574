"""Count exact-duplicate groups by hashing the corpus directly and compare with duplicate_groups.jsonl.

    python verify/exact_groups.py --corpus-dir DIR --groups OUT/duplicate_groups.jsonl
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python verify/<name>.py
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _reference import corpus_files, iter_documents  # noqa: E402
else:  # imported as verify.<name> (a checkout) or corpus_dagster.verify.<name> (the installed wheel)
    from ._reference import corpus_files, iter_documents  # noqa: E402


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
    p.add_argument("--corpus-dir", required=True)
    p.add_argument("--groups", required=True)
    p.add_argument("--exclude", help="folder under the corpus dir to skip (the analysis out dir)")
    a = p.parse_args(argv)
    res = check_exact_groups(corpus_files(a.corpus_dir, a.exclude), a.groups)
    print(f"{'PASS' if res['passed'] else 'FAIL'}: {res['docs']} documents, {res['groups']} exact groups found, "
          f"{res['reported']} reported")
    for f in res["failures"]:
        print(f"  {f}")
    return 0 if res["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
