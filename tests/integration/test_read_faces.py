"""Each stage's read face (`<stage>/outputs.py`): light to import, the only module other stages read, and no
import circle anywhere in the package."""

from __future__ import annotations

import json
import subprocess
import sys

import grimp
import pytest

from corpus_dagster.clean import driver as clean_driver
from corpus_dagster.clean import outputs as clean_outputs
from corpus_dagster.scrub import driver as scrub_driver
from corpus_dagster.scrub import outputs as scrub_outputs

READ_FACES = ("ingest", "clean", "minhash", "dedup", "scrub", "publish", "tokenize", "release")
# what a reader must not pay for: the drivers, the cleaner and filters, the PII detectors, the tokenizers,
# the publish checks, and the libraries only they load
HEAVY = ("driver", "clean.cleaner", "clean.filters", "scrub.api", "lib.tokenizers", "publish.checks")
HEAVY_LIBS = ("numba", "phonenumbers", "fsspec", "ftfy", "fasttext")


def _loaded_after_import(module: str) -> list[str]:
    code = f"import json, sys; import {module}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


@pytest.mark.parametrize("stage", READ_FACES)
def test_a_read_face_loads_no_driver_and_no_heavy_module(stage: str) -> None:
    loaded = _loaded_after_import(f"corpus_dagster.{stage}.outputs")
    ours = [m for m in loaded if m.startswith("corpus_dagster.")]
    assert not [m for m in ours if m.endswith(HEAVY)], ours
    assert not [m for m in loaded if m.split(".")[0] in HEAVY_LIBS]


def test_names_in_heavy_modules_load_on_first_use() -> None:
    from corpus_dagster.clean import filters
    from corpus_dagster.scrub import api

    assert clean_outputs.REASON_CODES is filters.REASON_CODES and clean_outputs.find_reason is filters.find_reason
    assert scrub_outputs.PII_TYPES is api.PII_TYPES and scrub_outputs.find_pii_batch is api.find_pii_batch
    with pytest.raises(AttributeError):
        _ = clean_outputs.no_such_name


def test_a_driver_and_its_read_face_name_the_same_stage_folder() -> None:
    # the read face never imports its driver eagerly, so each spells the folder name once; they must agree
    assert clean_driver.STAGE == clean_outputs.STAGE
    assert scrub_driver.STAGE == scrub_outputs.STAGE


def test_package_inits_import_no_module_of_the_package_and_serve_their_names() -> None:
    loaded = _loaded_after_import("corpus_dagster.tokenize, corpus_dagster.scrub, corpus_dagster.dedup, "
                                  "corpus_dagster.minhash, corpus_dagster.analysis, corpus_dagster.explain, "
                                  "corpus_dagster.clean, corpus_dagster.defs")
    packages = {"corpus_dagster", *(f"corpus_dagster.{p}" for p in
                                    ("tokenize", "scrub", "dedup", "minhash", "analysis", "explain", "clean", "defs"))}
    lazy = {"corpus_dagster.core", "corpus_dagster.core.lazy"}  # the one helper they name their entries through
    assert [m for m in loaded if m.startswith("corpus_dagster") and m not in packages | lazy] == []


def test_the_package_has_no_import_circle() -> None:
    # every import counts, inside functions too: a lazy import that closes a circle is still a circle
    graph = grimp.build_graph("corpus_dagster", include_external_packages=False)
    circles = [(a, b) for a in sorted(graph.modules) for b in sorted(graph.find_modules_directly_imported_by(a))
               if graph.chain_exists(importer=b, imported=a)]
    assert circles == []


def test_a_package_name_loads_its_module_on_first_use() -> None:
    import corpus_dagster.scrub as scrub
    from corpus_dagster.scrub import api

    assert scrub.find_pii_batch is api.find_pii_batch and "find_pii_batch" in scrub.__all__
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        _ = scrub.no_such_name
