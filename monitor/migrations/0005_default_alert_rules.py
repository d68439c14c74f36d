# The alert rules the issue asks for by default (issue 10); editable in the admin afterwards.
from django.db import migrations

DEFAULT_RULES = [
    {
        "name": "KV cache usage high",
        "kind": "kv_usage_high",
        "severity": "warning",
        "threshold": 0.9,
        "duration_s": 300,
        "description": "KV cache usage at or above 90% for 5 minutes: new requests will soon queue.",
    },
    {
        "name": "Requests waiting on a full KV cache",
        "kind": "waiting_while_full",
        "severity": "critical",
        "threshold": 0.9,
        "duration_s": 0,
        "description": "Requests are waiting while an engine's KV cache is at or above 90%: capacity, not load "
        "balancing, holds them back.",
    },
    {
        "name": "Preemptions rising",
        "kind": "preemptions_rising",
        "severity": "critical",
        "threshold": 0.0,
        "duration_s": 60,
        "description": "The engine preempted requests in the last minute (vLLM's dashboards mark any preemption "
        "critical): running requests lose their KV blocks and are recomputed.",
    },
    {
        "name": "Scrape down",
        "kind": "scrape_down",
        "severity": "critical",
        "threshold": 3,
        "duration_s": 0,
        "description": "The endpoint's /metrics failed, or its agent sent nothing, for 3 scrape intervals in a row.",
    },
    {
        "name": "KV capacity below plan",
        "kind": "capacity_below_plan",
        "severity": "warning",
        "threshold": 10.0,
        "duration_s": 0,
        "description": "The server allocated over 10% fewer KV tokens than its scenario planned (see the report "
        "for the likely cause).",
    },
]


def create_default_rules(apps, schema_editor):
    AlertRule = apps.get_model("monitor", "AlertRule")
    for rule in DEFAULT_RULES:
        AlertRule.objects.get_or_create(name=rule["name"], defaults=rule)


def remove_default_rules(apps, schema_editor):
    apps.get_model("monitor", "AlertRule").objects.filter(name__in=[rule["name"] for rule in DEFAULT_RULES]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("monitor", "0004_alerts"),
    ]

    operations = [migrations.RunPython(create_default_rules, remove_default_rules)]
