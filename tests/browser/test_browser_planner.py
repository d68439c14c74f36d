"""The planner in a real browser: log in, plan Qwen3 8B on an RTX 4090 with a live preview, save, find it
in the list, compare two scenarios. Takes the README's screenshot of the detail page on the way."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from playwright.sync_api import expect

from planner.models import GpuProfile, ModelProfile, Scenario
from planner.services import catalog_load

README_SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "screenshots" / "scenario-detail.png"
PASSWORD = "correct horse battery staple"
CHARTS = ("chart-memory", "chart-context", "chart-allocation", "chart-kv-variants")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def make_planner(username: str):
    user = get_user_model().objects.create_user(username=username, password=PASSWORD)
    user.user_permissions.add(Permission.objects.get(content_type__app_label="planner", codename="add_scenario"))
    return user


def log_in(page, live_server, username: str) -> None:
    page.goto(f"{live_server.url}/accounts/login/?next=/planner/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/planner/$"))


def test_plan_save_find_and_compare_in_the_browser(page, live_server, tmp_path):
    catalog_load()
    user = make_planner("alice")
    other = Scenario.objects.create(
        name="Qwen3 8B, 4 × 8K on an L4",
        owner=user,
        model=ModelProfile.objects.get(slug="qwen3-8b"),
        gpu=GpuProfile.objects.get(slug="l4"),
        max_model_len=8192,
        concurrency=4,
    )
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    # The browser reports what the Content-Security-Policy blocked on the console: the pages must need nothing.
    csp_violations: list[str] = []
    page.on("console", lambda m: csp_violations.append(m.text) if "Content Security Policy" in m.text else None)

    log_in(page, live_server, "alice")
    page.click("text=New scenario")
    page.wait_for_url(re.compile(r"/planner/scenarios/new/$"))

    # The defaults the issue asks for.
    assert page.input_value("#id_concurrency") == "1"
    assert page.input_value("#id_tensor_parallel_size") == "1"
    assert page.input_value("#id_context_rounding") == "exact"

    page.fill("#id_name", "Qwen3 8B chat on one RTX 4090")
    page.select_option("#id_model", "qwen3-8b")
    page.select_option("#id_gpu", "rtx-4090")
    page.fill("#id_max_model_len", "16384")
    headline = page.locator("#headline-text")
    # expect() polls without evaluating strings in the page, which the Content-Security-Policy forbids.
    expect(headline).to_contain_text("1 sequence × 16K", timeout=15_000)
    assert headline.text_content().startswith("fits: 1 sequence × 16K on 1× RTX 4090")

    page.fill("#id_concurrency", "2")
    expect(headline).to_contain_text("2 sequences × 16K")
    assert headline.text_content().startswith("fits: 2 sequences × 16K on 1× RTX 4090")

    # A bad value shows the field's error inline without a round trip through save.
    page.fill("#id_concurrency", "-3")
    page.wait_for_selector('ul.errorlist.live[data-for="concurrency"] li')
    page.fill("#id_concurrency", "2")
    page.wait_for_selector('ul.errorlist.live[data-for="concurrency"]', state="hidden")

    page.click("#save-button")
    page.wait_for_url(re.compile(r"/planner/scenarios/\d+/$"))
    saved = Scenario.objects.get(name="Qwen3 8B chat on one RTX 4090")
    assert (saved.concurrency, saved.max_model_len, saved.owner_id) == (2, 16384, user.pk)
    assert page.locator("#headline-text").text_content().startswith("fits: 2 sequences × 16K")
    for chart in CHARTS:
        page.wait_for_selector(f"#{chart} svg.main-svg")
        assert page.locator(f"#{chart} svg").count() >= 1
    assert "vllm serve Qwen/Qwen3-8B" in page.locator("#vllm-command").text_content()

    # Reload without the "Saved" message so the README shows the page as anyone opening it sees it.
    page.reload()
    for chart in CHARTS:
        page.wait_for_selector(f"#{chart} svg.main-svg")
    # The README's copy is refreshed only when asked, so a test run leaves the checkout clean.
    update_readme = os.environ.get("KVDASH_UPDATE_SCREENSHOTS") == "1"
    screenshot = README_SCREENSHOT if update_readme else tmp_path / "scenario-detail.png"
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(screenshot), full_page=True)
    assert screenshot.read_bytes().startswith(b"\x89PNG")
    assert screenshot.stat().st_size > 20_000

    page.click("text=Planner")
    page.fill("input[name=q]", "RTX 4090")
    page.click("form[role=search] button[type=submit]")
    row = page.locator(f"tr[data-scenario='{saved.pk}']")
    assert row.locator("text=Qwen3 8B chat on one RTX 4090").count() == 1
    assert row.locator(".badge.ok").text_content() == "fits"

    page.goto(f"{live_server.url}/planner/")
    page.check(f"input[name=ids][value='{saved.pk}']")
    page.check(f"input[name=ids][value='{other.pk}']")
    page.click("#compare-button")
    page.wait_for_url(re.compile(r"/planner/scenarios/compare/"))
    page.wait_for_selector("#chart-compare svg.main-svg")
    table = page.locator("table.compare").text_content()
    assert "Qwen3 8B chat on one RTX 4090" in table
    assert "Qwen3 8B, 4 × 8K on an L4" in table
    assert page.locator("#chart-compare .scatterlayer .trace").count() >= 2
    assert errors == []
    assert csp_violations == []
