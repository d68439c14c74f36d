"""factory-boy factories for every planner test, pages and API alike (conftest.py puts this folder on the path)."""

from __future__ import annotations

import factory
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from factory.django import DjangoModelFactory

from planner.models import GpuProfile, ModelProfile, Scenario

PASSWORD = "correct horse battery staple"
# ``planner=True`` grants the planner role's entry permission (planner.permissions.is_planner); ``editor=True``
# adds what the planner group grants beyond it (the lead's data migration), given directly so tests never
# need the group: editing and deleting any scenario, adding models.
PLANNER_PERMS = ("add_scenario",)
EDITOR_PERMS = ("change_scenario", "delete_scenario", "add_modelprofile")


def _grant(user: object, codenames: tuple[str, ...]) -> None:
    user.user_permissions.add(  # type: ignore[attr-defined]
        *Permission.objects.filter(content_type__app_label="planner", codename__in=codenames)
    )


class UserFactory(DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.PostGenerationMethodCall("set_password", PASSWORD)

    @factory.post_generation
    def planner(self, create: bool, extracted: bool | None, **kwargs: object) -> None:
        # The permission rows are recreated by post_migrate even after a transactional test flushed them.
        if create and extracted:
            _grant(self, PLANNER_PERMS)

    @factory.post_generation
    def editor(self, create: bool, extracted: bool | None, **kwargs: object) -> None:
        if create and extracted:
            _grant(self, PLANNER_PERMS + EDITOR_PERMS)
        if create:
            self.save()


class ScenarioFactory(DjangoModelFactory):
    """Qwen3 8B on an RTX 4090 at 8K, one sequence; pass model/gpu/inputs to change it."""

    class Meta:
        model = Scenario

    name = factory.Sequence(lambda n: f"Scenario {n}")
    owner = factory.SubFactory(UserFactory)
    model = factory.LazyFunction(lambda: ModelProfile.objects.get(slug="qwen3-8b"))
    gpu = factory.LazyFunction(lambda: GpuProfile.objects.get(slug="rtx-4090"))
    max_model_len = 8192
    concurrency = 1


class ApiScenarioFactory(ScenarioFactory):
    """The API tests' usual question: Llama 3.1 8B on an H100 SXM, 4 sequences of 8K."""

    name = factory.Sequence(lambda n: f"API scenario {n}")
    model = factory.LazyFunction(lambda: ModelProfile.objects.get(slug="llama-3.1-8b"))
    gpu = factory.LazyFunction(lambda: GpuProfile.objects.get(slug="h100-sxm"))
    concurrency = 4
