"""Two runs of one stage key share its work folder: when one run's finish removes it, the other run's
units and finish end quietly (the stage is committed), instead of failing on a missing plan."""

import shutil

import dagster as dg
import pytest
from corpus_factory import write_setup

from corpus_dagster.core.errors import CorpusError
from corpus_dagster.core.settings import Settings
from corpus_dagster.core.units import finish_stage, plan_next_stage, plan_stage, run_stage, run_stage_unit
from corpus_dagster.dedup import units as dedup
from corpus_dagster.dedup.driver import run_global_dedup
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.defs.runner import materialize_sources
from corpus_dagster.publish import driver as publish
from corpus_dagster.scrub.driver import run_scrub
from corpus_dagster.tokenize import driver as tokens


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    corpus = CorpusConfig(config_path=str(write_setup(tmp_path_factory.mktemp("units"))))
    materialize_sources(corpus, dg.DagsterInstance.ephemeral())
    layout = corpus.layout()
    return Settings.from_resolved(corpus.resolved()), layout, [s for s in ("alpha", "beta", "gamma")]


def test_units_of_a_plan_whose_key_another_run_finished_do_nothing(sources):
    resolved, layout, ids = sources
    # Run B plans dedup, then run A (the whole stage) finishes the same key and removes the work folder.
    stage = dedup.DedupStage(tuple(ids))
    plan_b = plan_stage(stage, layout, resolved)
    assert plan_b.units and dedup.work_folder(layout, plan_b.key).path.exists()
    run_global_dedup(layout, resolved, ids)
    assert not dedup.work_folder(layout, plan_b.key).path.exists()
    for unit in plan_b.units:  # B's units: nothing to do, no error
        run_stage_unit(stage, layout, resolved, plan_b.key, unit)
    assert plan_next_stage(stage, layout, resolved, plan_b).cached is True
    assert finish_stage(stage, layout, resolved, plan_b).cached

    run_scrub(layout, resolved)
    # the same race for the other unit stages
    for stage in (publish.PUBLISH_UNITS, tokens.TOKENS_UNITS):
        plan_b = plan_stage(stage, layout, resolved)
        assert plan_b.units
        run_stage(stage, layout, resolved)
        for unit in plan_b.units:
            run_stage_unit(stage, layout, resolved, plan_b.key, unit)
        assert finish_stage(stage, layout, resolved, plan_b).cached


def test_a_unit_without_a_plan_still_fails_when_the_stage_is_not_committed(sources):
    resolved, layout, ids = sources
    other = Settings.from_resolved({**resolved.resolved, "dedup": {**resolved.resolved["dedup"], "jaccard_threshold": 0.55}})
    plan = plan_stage(dedup.DedupStage(tuple(ids)), layout, other)
    shutil.rmtree(dedup.work_folder(layout, plan.key).path)
    with pytest.raises(CorpusError, match="dedup_plan"):
        run_stage_unit(dedup.DEDUP_UNITS, layout, resolved, plan.key, plan.units[0])
