"""Texts read back for the review page are cut to the excerpt as they arrive, except the PII rows' whole
texts, which their windows need: a sample of long documents no longer holds every whole text at once."""

import pyarrow as pa
import pyarrow.parquet as pq

from corpus_dagster.review import driver


def test_fetched_texts_are_cut_but_the_full_ones_and_their_lengths_stay_exact(tmp_path):
    texts = ["a" * 5000, "b" * 10, None]
    paths = []
    for i in range(2):  # two files: each read on its own
        path = tmp_path / f"docs-{i}.parquet"
        pq.write_table(pa.table({"id": [f"s:{i}{j}" for j in range(3)], "url": ["u"] * 3, "text": texts}), path)
        paths.append(path)
    got = driver._fetch(paths, ["s:00", "s:01", "s:02", "s:10", "s:99"], ["url", "text"], limit=100, full={"s:10"})
    assert sorted(got) == ["s:00", "s:01", "s:02", "s:10"]
    assert got["s:00"]["text"] == driver.Cut("a" * 100, 5000) and got["s:01"]["text"] == driver.Cut("b" * 10, 10)
    assert got["s:02"]["text"] is None and got["s:10"]["text"] == "a" * 5000
    row: dict = {}
    driver._set_text(row, "text", got["s:00"]["text"], 40)
    assert row == {"text": "a" * 40, "text_chars": 5000}
    driver._set_text(row, "partner_text", got["s:10"]["text"], 40)
    assert row["partner_text"] == "a" * 40 and row["partner_chars"] == 5000


def test_a_full_text_handed_on_is_cut_once_its_consumer_has_it(tmp_path):
    """The PII windows are made as each clean text arrives: the whole text goes to the consumer, and only its
    excerpt stays, so the PII documents' whole texts are never all held at once."""
    path = tmp_path / "docs.parquet"
    pq.write_table(pa.table({"id": ["s:0", "s:1"], "url": ["u", "v"], "text": ["x" * 3000, "y" * 50]}), path)
    handed: list[tuple[str, int]] = []
    got = driver._fetch([path], ["s:0", "s:1"], ["url", "text"], limit=10, full={"s:0"},
                        on_full=lambda doc_id, text: handed.append((doc_id, len(text))))
    assert handed == [("s:0", 3000)]
    assert got["s:0"]["text"] == driver.Cut("x" * 10, 3000) and got["s:1"]["text"] == driver.Cut("y" * 10, 50)
