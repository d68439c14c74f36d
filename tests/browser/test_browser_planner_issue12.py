"""The planner in a browser, as a platform engineer tripped over it: clone then save, the live preview
when the model is cleared, the help and error texts screen readers follow, and a 390 px phone."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect
from test_browser_planner import log_in, make_planner

from planner.models import GpuProfile, ModelProfile, Scenario
from planner.services import catalog_load

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PHONE_WIDTH = 390


def _scenario(owner, **changes):
    fields = {
        "name": "Qwen3 8B on a 4090",
        "owner": owner,
        "model": ModelProfile.objects.get(slug="qwen3-8b"),
        "gpu": GpuProfile.objects.get(slug="rtx-4090"),
        "max_model_len": 16384,
        "concurrency": 1,
        **changes,
    }
    return Scenario.objects.create(**fields)


def test_clone_then_save_makes_a_new_scenario_with_the_edits(page, live_server):
    catalog_load()
    owner = make_planner("owner")
    source = _scenario(owner, name="original")
    make_planner("bob")
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    log_in(page, live_server, "bob")
    page.goto(f"{live_server.url}/planner/scenarios/{source.pk}/")
    page.click("a:has-text('Clone')")
    page.wait_for_url(re.compile(rf"/planner/scenarios/{source.pk}/clone/$"))
    assert page.input_value("#id_name") == "original (copy)"
    page.fill("#id_name", "bob's copy")
    page.fill("#id_concurrency", "2")
    # expect() polls without evaluating a string in the page, which the Content-Security-Policy forbids.
    expect(page.locator("#headline-text")).to_contain_text("2 sequences")
    page.click("#save-button")
    page.wait_for_url(re.compile(r"/planner/scenarios/\d+/$"))
    copy = Scenario.objects.get(name="bob's copy")
    assert copy.pk != source.pk
    assert (copy.owner.username, copy.concurrency, copy.max_model_len) == ("bob", 2, 16384)
    source.refresh_from_db()
    assert (source.name, source.concurrency) == ("original", 1)
    assert page.url.endswith(f"/planner/scenarios/{copy.pk}/")
    assert errors == []


def test_preview_clears_when_the_model_is_cleared_and_live_errors_are_announced(page, live_server):
    catalog_load()
    make_planner("carol")
    log_in(page, live_server, "carol")
    page.goto(f"{live_server.url}/planner/scenarios/new/")
    page.fill("#id_name", "x")
    page.select_option("#id_model", "qwen3-8b")
    page.select_option("#id_gpu", "rtx-4090")
    page.wait_for_selector("#headline-text")
    page.select_option("#id_model", "")
    page.wait_for_selector("#preview-empty")
    assert page.locator("#headline-text").count() == 0

    # The help text's id is the one the control names in aria-describedby.
    described = page.get_attribute("#id_max_model_len", "aria-describedby")
    assert described and page.locator(f"#{described.split()[0]}").text_content().startswith("Blank:")
    page.select_option("#id_model", "qwen3-8b")
    page.fill("#id_concurrency", "-3")
    page.wait_for_selector('ul.errorlist.live[data-for="concurrency"] li')
    assert page.get_attribute("#id_concurrency", "aria-invalid") == "true"
    ids = page.get_attribute("#id_concurrency", "aria-describedby").split()
    assert "id_concurrency_live_error" in ids
    page.fill("#id_concurrency", "2")
    page.wait_for_selector('ul.errorlist.live[data-for="concurrency"]', state="hidden")
    assert page.get_attribute("#id_concurrency", "aria-invalid") is None


def test_a_failed_submit_with_model_and_gpu_does_not_ask_to_pick_them(page, live_server):
    catalog_load()
    make_planner("dan")
    log_in(page, live_server, "dan")
    page.goto(f"{live_server.url}/planner/scenarios/new/")
    page.select_option("#id_model", "qwen3-8b")
    page.select_option("#id_gpu", "rtx-4090")
    page.fill("#id_name", "")
    page.click("#save-button")  # the name is required: the page comes back with the error
    page.wait_for_selector(".field.has-error, ul.errorlist li")
    assert "Pick a model and a GPU" not in page.locator("#preview").text_content()


@pytest.mark.parametrize("path", ["list", "detail"])
def test_pages_fit_a_390_px_phone(browser, live_server, path):
    catalog_load()
    user = make_planner("erin")
    scenario = _scenario(user, name="A rather long scenario name that people do write, for a phone")
    context = browser.new_context(viewport={"width": PHONE_WIDTH, "height": 844}, device_scale_factor=1)
    page = context.new_page()
    page.set_default_timeout(15_000)
    try:
        log_in(page, live_server, "erin")
        url = "/planner/" if path == "list" else f"/planner/scenarios/{scenario.pk}/"
        page.goto(f"{live_server.url}{url}")
        if path == "detail":
            page.wait_for_selector("#chart-context svg.main-svg")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE_WIDTH, f"{path} page is {width} px wide"
        if path == "detail":
            # Each chart keeps a usable plot area: the legend may not squash it below half the chart.
            for chart in ("chart-context", "chart-memory", "chart-kv-variants"):
                plot = page.evaluate(
                    f"(() => {{ const r = document.querySelector('#{chart} .nsewdrag')?.getBoundingClientRect();"
                    f" const c = document.querySelector('#{chart}').getBoundingClientRect();"
                    " return r ? [r.width, r.height, c.width, c.height] : null; })()"
                )
                assert plot is not None
                assert plot[0] >= 0.5 * plot[2] and plot[1] >= 120, f"{chart}: plot area {plot}"
    finally:
        context.close()
