from __future__ import annotations

import random
import statistics

import pytest

from monitor.simulator.load import LengthDistribution, LoadGenerator, LoadSpec


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("512", LengthDistribution("fixed", 512)),
        ("fixed:512", LengthDistribution("fixed", 512)),
        ("uniform:128:2048", LengthDistribution("uniform", 128, 2048)),
        ("lognormal:1024:0.8", LengthDistribution("lognormal", 1024, 0.8)),
    ],
)
def test_distributions_parse(text, expected):
    assert LengthDistribution.parse(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("zipf:3", "unknown distribution"),
        ("uniform:5", "takes 2"),
        ("uniform:9:3", "LOW <= HIGH"),
        ("fixed:abc", "not a number"),
        ("fixed:0", "at least 1"),
        ("lognormal:100:9", "sigma"),
        ("fixed:nan", "finite"),
    ],
)
def test_bad_distributions_are_refused_with_a_reason(text, message):
    with pytest.raises(ValueError, match=message):
        LengthDistribution.parse(text)


def test_samples_stay_in_range_and_follow_the_distribution():
    rng = random.Random(1)
    uniform = [LengthDistribution("uniform", 100, 200).sample(rng) for _ in range(2000)]
    assert min(uniform) >= 100 and max(uniform) <= 200
    assert statistics.mean(uniform) == pytest.approx(150, rel=0.03)
    lognormal = [LengthDistribution("lognormal", 1000, 0.5).sample(rng) for _ in range(4000)]
    assert statistics.median(lognormal) == pytest.approx(1000, rel=0.05)
    assert statistics.mean(lognormal) == pytest.approx(LengthDistribution("lognormal", 1000, 0.5).mean(), rel=0.05)
    assert LengthDistribution("fixed", 7).sample(rng) == 7


def test_poisson_arrivals_have_the_asked_rate():
    generator = LoadGenerator(LoadSpec(rate=5.0, seed=3))
    arrivals = generator.pop_due(2000.0)
    assert len(arrivals) == pytest.approx(10_000, rel=0.05)
    times = [r.arrival_time for r in arrivals]
    assert times == sorted(times) and times[-1] <= 2000.0
    assert generator.next_arrival_time > 2000.0


def test_a_seed_replays_the_same_requests():
    def requests(seed):
        spec = LoadSpec(rate=2.0, seed=seed, shared_prefix_fraction=0.5, shared_prefix_tokens=64)
        arrivals = LoadGenerator(spec).pop_due(50)
        return [(r.arrival_time, r.prompt_tokens, r.output_tokens, r.prefix_key) for r in arrivals]

    assert requests(11) == requests(11)
    assert requests(11) != requests(12)


def test_shared_prefix_fraction_and_length():
    spec = LoadSpec(
        rate=10.0, seed=5, prompt=LengthDistribution("fixed", 100), shared_prefix_fraction=0.3, shared_prefix_tokens=256
    )
    arrivals = LoadGenerator(spec).pop_due(300.0)
    shared = [r for r in arrivals if r.prefix_key is not None]
    assert len(shared) / len(arrivals) == pytest.approx(0.3, abs=0.03)
    assert all(r.prefix_tokens == 256 and r.prompt_tokens == 356 for r in shared)
    assert all(r.prompt_tokens == 100 and r.prefix_tokens == 0 for r in arrivals if r.prefix_key is None)
    assert {r.prefix_key for r in shared} == set(range(spec.num_prefixes))


def test_max_tokens_caps_outputs_and_marks_them_length():
    spec = LoadSpec(rate=10.0, seed=2, output=LengthDistribution("uniform", 1, 100), max_tokens=50)
    arrivals = LoadGenerator(spec).pop_due(100.0)
    assert max(r.output_tokens for r in arrivals) == 50
    assert all(r.finish_reason == ("length" if r.output_tokens == 50 else "stop") for r in arrivals)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"rate": -1.0}, "rate"),
        ({"rate": 1.0, "concurrency": 2}, "concurrency"),
        ({"shared_prefix_fraction": 1.5}, "shared_prefix_fraction"),
        ({"max_tokens": 0}, "max_tokens"),
    ],
)
def test_bad_load_specs_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        LoadSpec(**kwargs)
