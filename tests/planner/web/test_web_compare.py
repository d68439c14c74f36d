"""Compare 2-4 scenarios: a table of key figures and one overlaid chart."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from planner_factories import ScenarioFactory

from planner.models import GpuProfile

COMPARE = reverse("planner:scenario-compare")


@pytest.mark.django_db
def test_compare_two_scenarios_side_by_side(viewer_client, catalog):
    small = ScenarioFactory(name="on a 4090", max_model_len=16384, concurrency=2)
    big = ScenarioFactory(name="on an H100", gpu=GpuProfile.objects.get(slug="h100-sxm"), concurrency=16)
    response = viewer_client.get(COMPARE, {"ids": [big.pk, small.pk]})
    assert response.status_code == 200
    assert [s.name for s in response.context["scenarios"]] == ["on an H100", "on a 4090"]
    table = dict(response.context["table"])
    assert table["Fits"] == ["yes", "yes"]
    assert table["Concurrency"] == ["16", "2"]
    assert table["GPUs"] == ["1× H100 SXM5", "1× RTX 4090"]
    figure = response.context["figures"]["chart-compare"]
    lines = [trace for trace in figure["data"] if trace["mode"] == "lines"]
    assert [trace["name"] for trace in lines] == ["on an H100", "on a 4090"]
    # The legend sits below the plot area (y < 0), so it never covers a curve.
    assert figure["layout"]["legend"]["y"] < 0 and figure["layout"]["legend"]["yanchor"] == "top"
    body = response.content.decode()
    assert 'id="chart-compare"' in body and re.search(r'src="/vendor/plotly\.[0-9a-f]{16}\.min\.js"', body)


@pytest.mark.django_db
def test_compare_takes_up_to_four(viewer_client, catalog):
    ids = [s.pk for s in ScenarioFactory.create_batch(5)]
    assert viewer_client.get(COMPARE, {"ids": ids[:4]}).status_code == 200
    too_many = viewer_client.get(COMPARE, {"ids": ids})
    assert too_many.status_code == 400
    assert "Pick 2 to 4 scenarios to compare." in too_many.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("ids", [[], ["1"], ["x", "y"], ["999999", "999998"], ["-1", "1e3"]])
def test_compare_without_two_real_scenarios_explains_instead_of_failing(viewer_client, catalog, ids):
    ScenarioFactory()
    response = viewer_client.get(COMPARE, {"ids": ids})
    assert response.status_code == 400
    assert "Pick 2 to 4 scenarios" in response.content.decode()


@pytest.mark.django_db
def test_the_same_scenario_twice_counts_once(viewer_client, catalog):
    scenario = ScenarioFactory()
    assert viewer_client.get(COMPARE, {"ids": [scenario.pk, scenario.pk]}).status_code == 400


@pytest.mark.django_db
def test_scenario_names_reach_the_chart_as_text_not_plotly_markup(viewer_client, catalog):
    # Plotly reads <a href>, <b> and character references in names, and %{...} in hover templates.
    evil = '<a href="https://evil.example">click</a> 100% %{x}'
    first = ScenarioFactory(name=evil)
    second = ScenarioFactory(name="plain")
    response = viewer_client.get(COMPARE, {"ids": [first.pk, second.pk]})
    figure = response.context["figures"]["chart-compare"]
    escaped = "&lt;a href=&quot;https://evil.example&quot;&gt;click&lt;/a&gt; 100&#37; &#37;{x}"
    traces = {trace["legendgroup"]: [] for trace in figure["data"]}
    for trace in figure["data"]:
        traces[trace["legendgroup"]].append(trace)
    line, point = traces[str(first.pk)]
    assert line["name"] == escaped
    assert line["hovertemplate"] == f"{escaped}: %{{x}} × %{{y:,}} tokens<extra></extra>"
    assert point["name"].startswith(f"{escaped}: ")
    assert "<a" not in str(figure)
