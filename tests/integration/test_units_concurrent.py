"""Two runs of one stage key share its work folder: when one run's finish removes it, the other run's
units and finish end quietly (the stage is committed), instead of failing on a missing plan."""

import dataclasses
import shutil

import dagster as dg
import pytest
from corpus_factory import write_setup

from corpus_dagster.core.errors import CorpusError
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
    settings = corpus.settings()
    return settings, layout, [s for s in ("alpha", "beta", "gamma")]


def test_units_of_a_plan_whose_key_another_run_finished_do_nothing(sources):
    settings, layout, ids = sources
    # Run B plans dedup, then run A (the whole stage) finishes the same key and removes the work folder.
    plan_b = dedup.plan_dedup(layout, settings, ids)
    assert plan_b.units and dedup.work_folder(layout, plan_b.key).path.exists()
    run_global_dedup(layout, settings, ids)
    assert not dedup.work_folder(layout, plan_b.key).path.exists()
    for unit in plan_b.units:  # B's units: nothing to do, no error
        dedup.run_dedup_unit(layout, settings, plan_b.key, unit)
    assert dedup.plan_verify(layout, settings, plan_b.key).cached is not None
    assert dedup.finish_dedup(layout, settings, plan_b.key)["cached"]

    run_scrub(layout, settings)
    # the same race for the stages whose plan, whole run, unit and finish take (layout, settings)
    for plan, whole, run_unit, finish in (
        (publish.plan_publish, publish.run_publish, publish.run_publish_unit, publish.finish_publish),
        (tokens.plan_token_streams, tokens.run_token_streams, tokens.run_token_unit, tokens.finish_token_streams),
    ):
        plan_b = plan(layout, settings)
        assert plan_b.units
        whole(layout, settings)
        for unit in plan_b.units:
            run_unit(layout, settings, plan_b.key, unit)
        assert finish(layout, settings, plan_b.key).cached


def test_a_unit_without_a_plan_still_fails_when_the_stage_is_not_committed(sources):
    settings, layout, ids = sources
    lower = dataclasses.replace(settings, dedup=dataclasses.replace(settings.dedup, jaccard_threshold=0.55))
    plan = dedup.plan_dedup(layout, lower, ids)
    shutil.rmtree(dedup.work_folder(layout, plan.key).path)
    with pytest.raises(CorpusError, match="plan_dedup"):
        dedup.run_dedup_unit(layout, settings, plan.key, plan.units[0])
