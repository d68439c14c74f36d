"""Factories for the planner page tests (imported by conftest.py and the test modules)."""

from __future__ import annotations

import factory
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from factory.django import DjangoModelFactory

from planner.models import GpuProfile, ModelProfile, Scenario

PASSWORD = "correct horse battery staple"


class UserFactory(DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.PostGenerationMethodCall("set_password", PASSWORD)

    @factory.post_generation
    def planner(self, create: bool, extracted: bool | None, **kwargs: object) -> None:
        # Planners hold add_scenario (planner.permissions.is_planner); the migration's group may be gone
        # after a transactional test flushed it, the permission rows are recreated by post_migrate.
        if create and extracted:
            permission = Permission.objects.get(content_type__app_label="planner", codename="add_scenario")
            self.user_permissions.add(permission)
        if create:
            self.save()


class ScenarioFactory(DjangoModelFactory):
    class Meta:
        model = Scenario

    name = factory.Sequence(lambda n: f"Scenario {n}")
    owner = factory.SubFactory(UserFactory)
    model = factory.LazyFunction(lambda: ModelProfile.objects.get(slug="qwen3-8b"))
    gpu = factory.LazyFunction(lambda: GpuProfile.objects.get(slug="rtx-4090"))
    max_model_len = 8192
    concurrency = 1
