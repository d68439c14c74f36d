"""The monitor in a real browser: the fleet overview updates itself, an endpoint page draws its six charts
with the plan's line, the range picker switches windows, and both pages fit a 390 px phone."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from django.contrib.auth import get_user_model

from monitor.agent import AgentConfig, HistogramPacer, agent_round, payload_seal
from monitor.charts import CHART_IDS
from monitor.ingest import ingest_signed
from monitor.scrape import VllmScraper
from monitor.services import endpoint_register, node_key_create
from monitor.simulator.load import LengthDistribution, LoadSpec
from monitor.simulator.spec import ServerSpec, build_server
from planner.models import GpuProfile, ModelProfile, Scenario
from planner.services import catalog_load

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def simulated():
    spec = ServerSpec(
        num_gpu_blocks=1500,
        block_size=16,
        max_model_len=8192,
        model_name="meta-llama/Llama-3.1-8B",
        load=LoadSpec(
            rate=6.0, prompt=LengthDistribution("fixed", 800), output=LengthDistribution("fixed", 300), seed=3
        ),
        time_scale=4.0,
    )
    with build_server(spec) as server:
        yield server


class Feeder:
    """What the node's agent and the central ingest do, called in the test's thread (one database)."""

    def __init__(self, url: str) -> None:
        self.key = node_key_create(name="gpu-a")
        self.endpoint, _ = endpoint_register(url=url, node="gpu-a", name="llama-8b", scenario_id=_scenario().pk)
        self.config = AgentConfig(node="gpu-a", key=self.key, hostname="gpu-a")
        self.scraper = VllmScraper(timeout=5)
        self.pacer = HistogramPacer(every_s=0)

    def round(self) -> None:
        payload = agent_round(
            config=self.config,
            targets=[{"id": self.endpoint.pk, "url": self.endpoint.url}],
            scraper=self.scraper,
            nvml=None,
            pacer=self.pacer,
        )
        sealed = payload_seal(payload=payload, key=self.key)
        outcome = ingest_signed(body=sealed.body, key_id=sealed.key_id, signature=sealed.signature)
        assert outcome.refused is None and outcome.engine_rows == 1


def _scenario() -> Scenario:
    catalog_load()
    return Scenario.objects.create(
        name="Llama 8B on H100",
        owner=get_user_model().objects.create_user("planner"),
        model=ModelProfile.objects.get(slug="llama-3.1-8b"),
        gpu=GpuProfile.objects.get(slug="h100-sxm"),
        max_model_len=8192,
        concurrency=8,
    )


def test_overview_refreshes_itself_and_the_endpoint_page_draws_the_plan(page, live_server, simulated, settings):
    settings.KVDASH_SCRAPE_INTERVAL = 2
    settings.KVDASH_PUBLIC_MONITOR = True
    feeder = Feeder(simulated.url)
    for _ in range(3):
        feeder.round()
        time.sleep(0.5)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))

    page.goto(f"{live_server.url}/monitor/")
    tile = page.locator(f"[data-endpoint-id='{feeder.endpoint.pk}']")
    assert tile.get_attribute("data-state") == "ok"
    first = tile.get_attribute("data-kv-usage")
    assert 0 < float(first) < 1
    # No reload: a marker set on the page survives while the tile's value changes under it.
    page.evaluate("window.__kvdashMarker = 'same page'")
    wait_until = time.monotonic() + 30
    while time.monotonic() < wait_until and tile.get_attribute("data-kv-usage") == first:
        feeder.round()
        page.wait_for_timeout(1500)
    assert tile.get_attribute("data-kv-usage") != first
    assert page.evaluate("window.__kvdashMarker") == "same page"

    tile.click()
    page.wait_for_url(f"**/monitor/endpoints/{feeder.endpoint.pk}/")
    for chart in CHART_IDS:
        page.wait_for_selector(f"#{chart} svg.main-svg")
    names = page.evaluate("document.getElementById('chart-kv-tokens').data.map(t => t.name)")
    assert "plan: KV capacity" in names and "tokens in cache" in names
    # The x axis spans the chosen window: one hour, then six after the switch.
    assert _span_hours(page) == pytest.approx(1, abs=0.01)
    page.click("button[data-range='6h']")
    page.wait_for_function("document.getElementById('endpoint-charts').dataset.loadedRange === '6h'")
    assert _span_hours(page) == pytest.approx(6, abs=0.01)
    assert page.get_attribute("button[data-range='6h']", "aria-pressed") == "true"
    # The simulated server reports its own blocks (1,500) against the scenario's plan: the report says how far.
    assert float(page.get_attribute("#report-deviation", "data-deviation-pct")) < -5
    assert errors == []


def _span_hours(page) -> float:
    start, end = page.evaluate("document.getElementById('chart-kv-usage').layout.xaxis.range")
    return (dt.datetime.fromisoformat(end) - dt.datetime.fromisoformat(start)).total_seconds() / 3600


def test_both_pages_fit_a_phone(browser, live_server, simulated, settings):
    settings.KVDASH_PUBLIC_MONITOR = True
    feeder = Feeder(simulated.url)
    feeder.round()
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    page = context.new_page()
    try:
        for path in ("/monitor/", f"/monitor/endpoints/{feeder.endpoint.pk}/", "/monitor/report/"):
            page.goto(f"{live_server.url}{path}")
            if "endpoints" in path:
                page.wait_for_selector("#chart-speed svg.main-svg")
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, (path, width)
    finally:
        context.close()
