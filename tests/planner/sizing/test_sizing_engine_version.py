"""engine_version: "latest" or a vLLM release kvdash has rules for; nothing else gets rules."""

from __future__ import annotations

import pytest

from planner.sizing import SizingInputError
from planner.sizing.engine import engine_rules


@pytest.mark.parametrize(
    "version",
    [
        "99.99",
        "1.0",
        "0.34",
        "0.0",
        "\uff10.\uff11\uff10",  # full-width "0.10": int() reads these digits, a release name never has them
        "\u0660.\u0661\u0660",  # Arabic-Indic "0.10"
    ],
)
def test_unknown_or_made_up_releases_are_refused(version):
    with pytest.raises(SizingInputError) as caught:
        engine_rules(version)
    assert "from 0.1 to 0.33" in caught.value.errors["engine_version"] or "release like" in str(caught.value)


@pytest.mark.parametrize(
    ("version", "label"), [("latest", "latest (0.33)"), ("0.1", "0.1"), ("v0.10.2", "0.10"), ("0.33.0rc1", "0.33")]
)
def test_latest_and_known_releases_get_rules(version, label):
    assert engine_rules(version).label == label
