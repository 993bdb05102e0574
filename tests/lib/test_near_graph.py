"""lib.near_graph: the graph spec a build's settings give."""

from corpus_dagster.lib.near_graph import dedup_graph_spec, graph_spec


def test_dedup_graph_spec_is_the_near_dup_graph_at_the_lower_threshold(make_settings):
    settings = make_settings({"near_dup": {"threshold": 0.9}, "dedup": {"jaccard_threshold": 0.75}})
    spec = dedup_graph_spec(settings)
    assert spec == graph_spec(settings.near_dup, 0.75)
    assert spec.threshold == 0.75 and spec.num_perm == settings.near_dup.num_perm
    fixed = dedup_graph_spec(make_settings({"near_dup": {"bands": 16, "rows": 8}}))
    assert (fixed.bands, fixed.rows) == (16, 8)
