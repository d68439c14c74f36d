"""factory-boy factories for the API tests (users with or without the planner role, scenarios)."""

from __future__ import annotations

import factory
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from factory.django import DjangoModelFactory

from planner.models import GpuProfile, ModelProfile, Scenario

# What the planner group grants (the lead's data migration); given directly so tests never need the group.
PLANNER_PERMS = ("add_scenario", "change_scenario", "delete_scenario", "add_modelprofile")


class ApiUserFactory(DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"api-user{n}")

    @factory.post_generation
    def planner(self, create: bool, extracted: bool | None, **kwargs: object) -> None:
        if create and extracted:
            self.user_permissions.add(
                *Permission.objects.filter(content_type__app_label="planner", codename__in=PLANNER_PERMS)
            )


class ApiScenarioFactory(DjangoModelFactory):
    class Meta:
        model = Scenario

    name = factory.Sequence(lambda n: f"API scenario {n}")
    owner = factory.SubFactory(ApiUserFactory)
    model = factory.LazyFunction(lambda: ModelProfile.objects.get(slug="llama-3.1-8b"))
    gpu = factory.LazyFunction(lambda: GpuProfile.objects.get(slug="h100-sxm"))
    max_model_len = 8192
    concurrency = 4
