"""compute_signatures: the per-source signature file (schema, nulls, settings, atomicity, workers)."""

from __future__ import annotations

import random
from pathlib import Path

import datasketch
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dedup_factory import random_doc, write_clean_docs
from settings_factory import near_dup_settings

from corpus_dagster.core.errors import DedupInputError
from corpus_dagster.lib.minhash import shingle_input_hash
from corpus_dagster.lib.text import byte_batches, words
from corpus_dagster.minhash.signatures import compute_signatures, signature_settings


def _texts(n: int = 50, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [random_doc(rng, rng.randint(0, 40)) for _ in range(n)] + [
        "too short",
        "",
        "exactly five words here now",
    ]


def test_signature_file_rows_schema_and_values(tmp_path: Path) -> None:
    cfg = near_dup_settings({"num_perm": 32, "bands": 8, "rows": 4})
    texts = _texts()
    docs = write_clean_docs(tmp_path / "docs.parquet", "src", texts, row_group_size=7)
    out = tmp_path / "sig.parquet"
    stats = compute_signatures([docs], out, cfg)
    table = pq.read_table(out)
    assert table.column_names == ["id", "n_bytes", "n_words", "n_shingles", "signature"]
    assert table.column("id").to_pylist() == [f"src:{k}" for k in range(len(texts))]
    sig_type = table.schema.field("signature").type
    assert (sig_type.list_size, sig_type.value_type) == (32, pa.uint32())
    sigs = table.column("signature").to_pylist()
    short = [i for i, t in enumerate(texts) if len(words(t)) < cfg.shingle_size]
    assert short and all(sigs[i] is None for i in short)
    assert stats["docs"] == len(texts) and stats["no_signature"] == len(short)
    assert table.column("n_words").to_pylist() == [len(words(t)) for t in texts]
    assert table.column("n_bytes").to_pylist() == [len(t.encode("utf-8")) for t in texts]
    for i, text in enumerate(texts):
        if sigs[i] is None:
            continue
        ws = words(text)
        ref = datasketch.MinHash(32, cfg.seed, hashfunc=shingle_input_hash("affine32"))
        ref.update_batch([" ".join(ws[j : j + 5]) for j in range(len(ws) - 4)])
        assert sigs[i] == ref.hashvalues.tolist()
    assert signature_settings(out) == {
        "num_perm": 32,
        "seed": 1,
        "scheme": "affine32",
        "shingle_size": 5,
        "format": 2,
    }


def test_affine64_signatures_are_uint64(tmp_path: Path) -> None:
    cfg = near_dup_settings({"num_perm": 16, "bands": 4, "rows": 4, "scheme": "affine64"})
    docs = write_clean_docs(tmp_path / "docs.parquet", "s", _texts(5))
    compute_signatures([docs], tmp_path / "sig.parquet", cfg)
    sig_type = pq.read_schema(tmp_path / "sig.parquet").field("signature").type
    assert (sig_type.list_size, sig_type.value_type) == (16, pa.uint64())


def test_several_files_keep_document_order_and_workers_change_no_byte(tmp_path: Path) -> None:
    cfg = near_dup_settings({"num_perm": 16, "bands": 4, "rows": 4, "batch_bytes": 65536})
    texts = _texts(120, seed=4)
    files = [
        write_clean_docs(
            tmp_path / f"docs-{i}.parquet",
            "s",
            texts[i * 40 : (i + 1) * 40],
            row_group_size=9,
            first_k=i * 40,
        )
        for i in range(3)
    ]
    compute_signatures(files, tmp_path / "w1.parquet", cfg, workers=1)
    compute_signatures(files, tmp_path / "w2.parquet", cfg, workers=2)
    assert (tmp_path / "w1.parquet").read_bytes() == (tmp_path / "w2.parquet").read_bytes()
    assert pq.read_table(tmp_path / "w1.parquet").column("id").to_pylist()[:3] == ["s:0", "s:1", "s:2"]


def test_missing_input_fails_and_leaves_no_file(tmp_path: Path) -> None:
    out = tmp_path / "sig.parquet"
    with pytest.raises(DedupInputError, match="does not exist"):
        compute_signatures([tmp_path / "nope.parquet"], out, near_dup_settings())
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_input_without_text_column_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"id": ["s:0"]}), bad)
    with pytest.raises(
        DedupInputError, match=r"bad.parquet: clean document file lacks column\(s\) \['text'\]"
    ):
        compute_signatures([bad], tmp_path / "sig.parquet", near_dup_settings())


def test_failure_midway_leaves_no_partial_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import corpus_dagster.minhash.signatures as mod

    docs = write_clean_docs(tmp_path / "docs.parquet", "s", _texts(30), row_group_size=5)
    calls = {"n": 0}
    real = mod._signature_task

    def flaky(*args):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("disk gone")
        return real(*args)

    monkeypatch.setattr(mod, "_signature_task", flaky)
    out = tmp_path / "out" / "sig.parquet"
    with pytest.raises(RuntimeError, match="disk gone"):
        compute_signatures([docs], out, near_dup_settings())
    assert not out.exists() and list(out.parent.iterdir()) == []


def test_byte_batches_cover_every_row_once() -> None:
    texts = pa.array(["x" * 10, "y" * 100, None, "z" * 5, "w" * 300])
    cuts = byte_batches(texts, 64)
    assert cuts[0][0] == 0 and cuts[-1][1] == 5
    assert all(a[1] == b[0] for a, b in zip(cuts, cuts[1:], strict=False))
    assert all(stop > start for start, stop in cuts)
    assert byte_batches(pa.array([], pa.string()), 64) == []
    assert np.all(np.diff([c[0] for c in cuts]) > 0)
