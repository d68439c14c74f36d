"""kvdash REST API, version 1: stateless sizing, scenarios and the catalog.

Each view validates with an input serializer, calls one function from sizing/selectors/services and answers.
The engine's SizingInputError becomes a 400 with a message per request field (BadInputAs400).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from planner import selectors
from planner import services as scenario_services
from planner.api import services, sizing
from planner.api.catalog_serializers import (
    GpuProfileSerializer,
    ModelImportRequestSerializer,
    ModelImportResponseSerializer,
    ModelProfileDetailSerializer,
    ModelProfileSerializer,
)
from planner.api.model_shapes import model_shape_from_spec
from planner.api.parsers import JSONBodyParser
from planner.api.permissions import CatalogAccess, ModelImportAccess, PublicSizing, ScenarioAccess
from planner.api.plan_serializers import CandidateSerializer, PlanSerializer
from planner.api.scenario_serializers import (
    ScenarioDetailSerializer,
    ScenarioFilterSerializer,
    ScenarioPlanErrorSerializer,
    ScenarioSerializer,
)
from planner.api.size_serializers import SizeRequestSerializer, SizeSearchRequestSerializer
from planner.api.throttles import AnonSizingThrottle
from planner.sizing import SizingInputError

# Catalog slugs carry dots ("llama-3.1-8b"); DRF's default lookup pattern stops at a dot.
SLUG_LOOKUP = r"[-a-zA-Z0-9_.]+"


# A 400 body: each offending request field (or non_field_errors, or detail for an unreadable body) with its
# messages; a list field's items are reported by index.
BAD_REQUEST = OpenApiResponse(
    {
        "type": "object",
        "additionalProperties": {
            "oneOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}, {"type": "object"}]
        },
    },
    description="Invalid input: messages per request field.",
)
SIZE_EXAMPLE = OpenApiExample(
    "Llama 3.1 8B on one H100",
    value={"model": "llama-3.1-8b", "gpu": "h100-sxm", "max_model_len": 32768, "concurrency": 16},
    request_only=True,
)
SIZE_CONFIG_EXAMPLE = OpenApiExample(
    "A config.json on a 24 GiB GPU",
    value={
        "model_config": {
            "model_type": "llama",
            "num_hidden_layers": 16,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "hidden_size": 2048,
            "intermediate_size": 8192,
            "vocab_size": 128256,
            "max_position_embeddings": 131072,
            "torch_dtype": "bfloat16",
        },
        "gpu_memory_gib": 24,
        "max_model_len": 16384,
        "concurrency": 4,
    },
    request_only=True,
)
SEARCH_EXAMPLE = OpenApiExample(
    "Llama 3.1 70B, 8 users at 32k, 50 ms TPOT",
    value={"model": "llama-3.1-70b", "max_model_len": 32768, "concurrency": 8, "target_tpot_ms": 50, "limit": 3},
    request_only=True,
)
SCENARIO_EXAMPLE = OpenApiExample(
    "Qwen3 8B chat on an L40S",
    value={"name": "Qwen3 8B chat", "model": "qwen3-8b", "gpu": "l40s", "max_model_len": 16384, "concurrency": 8},
    request_only=True,
)
IMPORT_EXAMPLE = OpenApiExample(
    "Preview a config.json",
    value={"config": SIZE_CONFIG_EXAMPLE.value["model_config"], "name": "Llama 3.2 1B"},
    request_only=True,
)


class BadInputAs400:
    """Mixin for API views: the engine's per-field SizingInputError answers 400 like a serializer error.

    Also parses JSON bodies with JSONBodyParser, so no body, however malformed, gives a 500.
    """

    parser_classes = [JSONBodyParser, FormParser, MultiPartParser]

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, SizingInputError):
            exc = ValidationError({field: [message] for field, message in exc.errors.items()})
        return super().handle_exception(exc)  # type: ignore[misc]


class SizeView(BadInputAs400, APIView):
    permission_classes = [PublicSizing]
    throttle_classes = [AnonSizingThrottle]

    @extend_schema(
        operation_id="size",
        summary="Size a deployment: inputs in, plan out (nothing is stored)",
        request=SizeRequestSerializer,
        responses={200: PlanSerializer, 400: BAD_REQUEST},
        examples=[SIZE_EXAMPLE, SIZE_CONFIG_EXAMPLE],
    )
    def post(self, request: Request) -> Response:
        params = SizeRequestSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        return Response(sizing.size_plan(data=params.validated_data))


class SizeSearchView(BadInputAs400, APIView):
    permission_classes = [PublicSizing]
    throttle_classes = [AnonSizingThrottle]

    @extend_schema(
        operation_id="size_search",
        summary="Cheapest catalog configurations (GPU, count, tensor parallel, KV dtype) meeting the SLA",
        request=SizeSearchRequestSerializer,
        responses={200: CandidateSerializer(many=True), 400: BAD_REQUEST},
        examples=[SEARCH_EXAMPLE],
    )
    def post(self, request: Request) -> Response:
        params = SizeSearchRequestSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        return Response(sizing.size_search(data=params.validated_data))


@extend_schema_view(
    list=extend_schema(
        parameters=[ScenarioFilterSerializer], responses={200: ScenarioSerializer(many=True), 400: BAD_REQUEST}
    ),
    create=extend_schema(
        request=ScenarioSerializer,
        responses={201: ScenarioDetailSerializer, 400: BAD_REQUEST},
        examples=[SCENARIO_EXAMPLE],
    ),
    update=extend_schema(request=ScenarioSerializer, responses={200: ScenarioDetailSerializer, 400: BAD_REQUEST}),
    partial_update=extend_schema(
        request=ScenarioSerializer, responses={200: ScenarioDetailSerializer, 400: BAD_REQUEST}
    ),
)
class ScenarioViewSet(BadInputAs400, viewsets.ModelViewSet):
    """Saved scenarios. Reads need a signed-in user; writes the planner role (edits/deletes: see permissions)."""

    permission_classes = [ScenarioAccess]
    lookup_value_regex = r"\d+"

    def get_queryset(self) -> Any:
        if self.action != "list":
            return selectors.scenario_list()
        filters = ScenarioFilterSerializer(data=self.request.query_params)
        filters.is_valid(raise_exception=True)
        values = filters.validated_data
        return selectors.scenario_list(
            search=values.get("search", ""),
            model_slug=values.get("model", ""),
            gpu_slug=values.get("gpu", ""),
            owner=values.get("owner", ""),
        )

    def get_serializer_class(self) -> type[serializers.Serializer]:
        return ScenarioSerializer if self.action == "list" else ScenarioDetailSerializer

    def perform_create(self, serializer: serializers.Serializer) -> None:
        serializer.instance = scenario_services.scenario_create(owner=self.request.user, data=serializer.validated_data)

    def perform_update(self, serializer: serializers.Serializer) -> None:
        serializer.instance = scenario_services.scenario_update(
            scenario=serializer.instance, data=serializer.validated_data
        )

    def perform_destroy(self, instance: Any) -> None:
        scenario_services.scenario_delete(scenario=instance)

    @extend_schema(
        summary="The scenario's plan, recomputed from its stored inputs",
        responses={
            200: PlanSerializer,
            422: OpenApiResponse(ScenarioPlanErrorSerializer, description="The stored inputs no longer give a plan."),
        },
    )
    @action(detail=True, methods=["get"])
    def plan(self, request: Request, pk: str | None = None) -> Response:
        plan, errors = selectors.scenario_plan_result(scenario=self.get_object())
        if plan is None:
            return Response({"plan_errors": errors}, status=status.HTTP_422_UNPROCESSABLE_ENTITY)
        return Response(plan)


def _slug_parameter(example: str) -> OpenApiParameter:
    return OpenApiParameter(
        "slug", OpenApiTypes.STR, OpenApiParameter.PATH, examples=[OpenApiExample(example, value=example)]
    )


@extend_schema_view(retrieve=extend_schema(parameters=[_slug_parameter("llama-3.1-8b")]))
class ModelProfileViewSet(BadInputAs400, viewsets.ReadOnlyModelViewSet):
    """Catalog and custom models by slug."""

    permission_classes = [CatalogAccess]
    lookup_field = "slug"
    lookup_value_regex = SLUG_LOOKUP
    queryset = selectors.model_profile_list()

    def get_serializer_class(self) -> type[serializers.Serializer]:
        return ModelProfileSerializer if self.action == "list" else ModelProfileDetailSerializer

    def get_queryset(self) -> Any:
        # The list shows no config: decoding every stored config.json to list models is slow, and one
        # pathological stored config would break the list.
        queryset = super().get_queryset()
        return queryset.defer("config") if self.action == "list" else queryset

    @extend_schema(
        operation_id="models_import",
        summary="Read an HF config.json: its shape, and with save=true keep it as a custom model",
        request=ModelImportRequestSerializer,
        responses={200: ModelImportResponseSerializer, 201: ModelImportResponseSerializer, 400: BAD_REQUEST},
        examples=[IMPORT_EXAMPLE],
    )
    @action(
        detail=False,
        methods=["post"],
        url_path="import",
        permission_classes=[ModelImportAccess],
        throttle_classes=[AnonSizingThrottle],
    )
    def import_config(self, request: Request) -> Response:
        params = ModelImportRequestSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        result = services.model_profile_import(user=request.user, **params.validated_data)
        body = ModelImportResponseSerializer(
            {"shape": model_shape_from_spec(result.spec), "saved": result.profile is not None, "model": result.profile}
        ).data
        return Response(body, status=status.HTTP_201_CREATED if result.profile else status.HTTP_200_OK)


@extend_schema_view(retrieve=extend_schema(parameters=[_slug_parameter("h100-sxm")]))
class GpuProfileViewSet(BadInputAs400, viewsets.ReadOnlyModelViewSet):
    """Catalog and custom GPUs by slug."""

    permission_classes = [CatalogAccess]
    lookup_field = "slug"
    lookup_value_regex = SLUG_LOOKUP
    queryset = selectors.gpu_profile_list()
    serializer_class = GpuProfileSerializer
