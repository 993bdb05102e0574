"""The Dagster UI as a person uses it: `dagster dev` on 127.0.0.1 with a fresh DAGSTER_HOME, headless Chromium
(Debian's package, launched through Playwright's `executable_path`; never a browser download).

Runs in `make test-e2e` (CORPUS_E2E=1); screenshots land in tests/e2e/artifacts/.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from ui_setup import REMOVED, build_corpus, free_port, start_dagster_dev, stop

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"

pytestmark = pytest.mark.skipif(os.environ.get("CORPUS_E2E") != "1", reason="browser test: run `make test-e2e`")


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no chromium at {CHROMIUM}: `apt-get install -y chromium` (make test-e2e does it) or set CHROMIUM")
    ARTIFACTS.mkdir(exist_ok=True)
    root = tmp_path_factory.mktemp("e2e")
    config, home = build_corpus(root)
    port = free_port()
    proc = start_dagster_dev(config, home, port, ARTIFACTS / "dagster-dev.log")
    try:
        yield f"http://127.0.0.1:{port}", home
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def page(ui):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(60_000)
        yield page
        browser.close()


def _open(page, url: str) -> None:
    page.goto(url, wait_until="networkidle")
    # the instance has nux off (ui_setup); should a dialog still open, it must not swallow the next click
    if page.locator(".bp5-dialog").count():
        page.keyboard.press("Escape")


def _runs(home: Path):
    import dagster as dg

    os.environ["DAGSTER_HOME"] = str(home)
    with dg.DagsterInstance.get() as instance:
        return instance.get_runs()


def _finished_new_run(home: Path, before: set[str], seconds: float):
    """The newest run not in `before` once it has finished, or None after `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        new = [r for r in _runs(home) if r.run_id not in before]
        if new and new[0].is_finished:
            return new[0]
        time.sleep(1)
    return None


def test_first_load_opens_no_dialog_and_the_timeline_lists_the_cli_runs(ui, page):
    base, home = ui
    page.goto(f"{base}/overview/activity/timeline", wait_until="networkidle")
    page.wait_for_timeout(2500)  # the community dialog opened 1 s after the first load
    assert page.locator(".bp5-dialog").count() == 0
    assert page.get_by_text("Join the Dagster community").count() == 0
    page.get_by_text("build_corpus").first.wait_for()
    body = page.inner_text("body")
    assert "No runs or scheduled ticks in this time period" not in body
    jobs = {r.job_name for r in _runs(home)}
    assert {"build_corpus", "build_source"} <= jobs, jobs
    for job in jobs:
        assert job in body, f"{job} is not on the timeline"
    page.screenshot(path=str(ARTIFACTS / "00-timeline.png"))


def test_the_clean_preview_fits_and_the_removed_source_is_not_headlined(ui, page):
    base, _ = ui
    page.set_viewport_size({"width": 1600, "height": 1000})
    try:
        _open(page, f"{base}/assets/clean_documents")
        header = page.locator("th", has_text="preview").first
        header.wait_for()
        header.scroll_into_view_if_needed()
        box = header.bounding_box()
        assert box is not None and box["x"] + box["width"] <= 1600, box
        # the key column stays in view beside the text: the table fits without a sideways scroll
        key = header.locator("xpath=ancestor::table[1]//th[normalize-space()='id']").first
        kbox = key.bounding_box()
        assert kbox is not None and kbox["x"] >= 0, kbox
        overflow = header.evaluate(
            "e => { for (let n = e.parentElement; n; n = n.parentElement) {"
            " if (n.scrollWidth > n.clientWidth + 1 && getComputedStyle(n).overflowX !== 'visible') return true; }"
            " return false; }")
        assert not overflow, "the preview table scrolls sideways at 1600 px"
        cell = page.get_by_text("chars)").first
        if cell.count():
            cbox = cell.bounding_box()
            assert cbox is not None and cbox["x"] + cbox["width"] <= 1600, cbox
        page.get_by_text("Latest materialization").first.wait_for()
        assert REMOVED not in page.inner_text("body")
        page.screenshot(path=str(ARTIFACTS / "07-clean-preview.png"), full_page=True)
    finally:
        page.set_viewport_size({"width": 1400, "height": 1000})


def test_explain_opens_from_the_shards_page_and_runs(ui, page):
    base, home = ui
    _open(page, f"{base}/assets/shards")
    link = page.locator("a[href*='explain_document_job/playground/setup']").first
    link.wait_for()
    href = link.get_attribute("href")
    assert href and href.startswith("/locations/")
    before = {r.run_id for r in _runs(home)}
    _open(page, base + href)
    page.get_by_text("explain_document").first.wait_for()
    page.get_by_role("button", name="Launch Run").first.click()
    run = _finished_new_run(home, before, 120)
    assert run is not None and run.job_name == "explain_document_job"
    assert run.status.value == "SUCCESS"
    _open(page, f"{base}/runs/{run.run_id}")
    page.get_by_text("Success").first.wait_for()
    page.get_by_text("journey").first.wait_for()
    page.screenshot(path=str(ARTIFACTS / "08-explain.png"))


def test_scrubbed_metadata_shows_placeholders_beside_urls_without_entities(ui, page):
    base, _ = ui
    _open(page, f"{base}/assets/scrubbed")
    page.get_by_text("examples").first.wait_for()
    page.get_by_text("<EMAIL>").first.wait_for()
    body = page.inner_text("body")
    assert "&lt;" not in body and "&gt;" not in body and "\\|" not in body
    assert page.locator("a[href*='impallari']").count() == 0  # the URL beside the placeholder is no link
    page.get_by_text("<EMAIL>").first.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "04-scrub-examples.png"))


def test_lineage_materialize_a_partition_checks_placeholders_and_charts(ui, page):
    base, home = ui
    _open(page, f"{base}/asset-groups")
    for group in ("ingest", "clean", "dedup", "scrub", "publish", "tokenize"):
        page.get_by_text(group, exact=True).first.wait_for()
    page.screenshot(path=str(ARTIFACTS / "01-lineage.png"))

    # materialize one source partition from the UI and wait for its run
    before = {r.run_id for r in _runs(home)}
    _open(page, f"{base}/assets/raw_documents")
    page.get_by_role("button", name="Materialize…").first.click()
    page.get_by_text("Select a partition or create one").click()
    page.get_by_placeholder("Filter partitions").fill("alpha")
    page.locator("span:text-is('alpha')").first.click()
    page.keyboard.press("Escape")
    page.get_by_role("button", name="Launch 1 run").click()
    run = _finished_new_run(home, before, 180)
    assert run is not None, "the run launched from the UI did not finish within 180 s"
    assert run.status.value == "SUCCESS" and run.tags.get("dagster/partition") == "alpha"
    _open(page, f"{base}/runs/{run.run_id}")
    page.get_by_text("Success").first.wait_for()
    page.screenshot(path=str(ARTIFACTS / "02-run-from-ui.png"))

    # the blocking checks of the shards show as passed
    _open(page, f"{base}/assets/shards?view=checks")
    page.get_by_text("ids_sorted").first.wait_for()
    body = page.inner_text("body")
    assert "Passed" in body and "Failed" not in body.split("Checks", 1)[-1]
    page.screenshot(path=str(ARTIFACTS / "03-shards-checks.png"))

    # a chart image loads
    _open(page, f"{base}/assets/dedup")
    page.locator("tr", has_text="charts").get_by_text("[Show Markdown]").first.click()
    chart = page.locator("img[src^='data:image/png']").first
    chart.wait_for()
    chart.scroll_into_view_if_needed()
    assert page.evaluate("(img) => img.complete && img.naturalWidth > 100", chart.element_handle())
    page.screenshot(path=str(ARTIFACTS / "05-dedup-chart.png"))
