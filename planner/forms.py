"""Planner forms. Each form that describes a plan computes it once in ``clean()``: the sizing engine is the
validator of last resort, and its ``SizingInputError.errors`` land on the form field they name."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django import forms
from django.core.files.uploadedfile import UploadedFile
from django.core.validators import MinValueValidator

from planner import services
from planner.api.sizing import HF_REPO_ID, config_hf_id
from planner.json_documents import document_problem
from planner.models import SCENARIO_INPUT_FIELDS, GpuProfile, ModelProfile, Scenario
from planner.plan_inputs import plan_inputs_from_values
from planner.selectors import EXPORT_FORMAT, EXPORT_VERSION, scenario_duplicates
from planner.services import SCENARIO_WRITE_FIELDS
from planner.sizing import ModelSpec, Plan, SizingInputError, compute_plan

# A config.json is a few kilobytes; anything this large is a mistake (or an attack), not a model.
MAX_CONFIG_BYTES = 1_000_000

BLOCK_SIZE_CHOICES = [("", "default (16; 64 for MLA)")] + [(str(n), str(n)) for n in (1, 8, 16, 32, 64, 128, 256)]
# Suggestions only (a datalist): the engine accepts any release it knows and says so when it does not.
ENGINE_VERSION_SUGGESTIONS = ("latest", "0.8", "0.9", "0.10", "0.11", "0.15", "0.19", "0.21", "0.33")


@dataclass(frozen=True)
class FieldGroup:
    """A titled fieldset of the scenario form; ``advanced`` ones start folded."""

    title: str
    fields: tuple[str, ...]
    advanced: bool = False


SCENARIO_FIELD_GROUPS: tuple[FieldGroup, ...] = (
    FieldGroup("Scenario", ("name", "notes")),
    FieldGroup("Model", ("model", "weight_dtype")),
    FieldGroup("Hardware", ("gpu", "gpu_count", "tensor_parallel_size", "pipeline_parallel_size")),
    FieldGroup(
        "Engine",
        (
            "kv_cache_dtype",
            "max_model_len",
            "gpu_memory_utilization",
            "block_size",
            "max_num_batched_tokens",
            "engine_version",
            "enable_prefix_caching",
            "num_speculative_tokens",
            "context_rounding",
        ),
    ),
    FieldGroup(
        "SLA",
        ("concurrency", "prompt_tokens", "output_tokens", "shared_prefix_tokens", "target_tpot_ms", "target_ttft_ms"),
    ),
    FieldGroup(
        "Overrides (advanced)",
        ("weights_gib", "activation_gib", "non_torch_gib", "kv_cache_memory_gib"),
        advanced=True,
    ),
)

SCENARIO_HELP = {
    "gpu_count": "Blank: tp × pp. More GPUs than that run data-parallel replicas.",
    "gpu_memory_utilization": "Blank: vLLM's default for the engine version (0.92 latest, 0.9 older).",
    "max_model_len": "Blank: the model's max_position_embeddings.",
    "max_num_batched_tokens": "Blank: vLLM's default for the GPU (sets the activation peak).",
    "concurrency": "Sequences served at once, each up to max_model_len tokens.",
    "weights_gib": "Whole model; blank: computed from the parameter count and weight dtype.",
    "activation_gib": "Per GPU; blank: estimated for the engine version.",
    "non_torch_gib": "Per GPU; blank: estimated (grows with tp for communication buffers).",
    "kv_cache_memory_gib": "Per GPU, like --kv-cache-memory-bytes: replaces the whole budget computation.",
}


class _NamesOnlyChoiceIterator(forms.models.ModelChoiceIterator):
    def __init__(self, field: forms.ModelChoiceField) -> None:
        super().__init__(field)
        # A drop-down shows names: reading every model's config.json to list them is slow, and one pathological
        # stored config would break the page.
        self.queryset = self.queryset.only("pk", "slug", "name")


class ModelProfileChoiceField(forms.ModelChoiceField):
    """A model by slug; the choices are listed without loading configs, the chosen row is read whole."""

    iterator = _NamesOnlyChoiceIterator


class ScenarioForm(forms.ModelForm):
    """Create or edit a scenario. ``preview=True`` drops the name requirement for the live recompute."""

    model = ModelProfileChoiceField(queryset=ModelProfile.objects.all(), to_field_name="slug")
    gpu = forms.ModelChoiceField(queryset=GpuProfile.objects.all(), to_field_name="slug", label="GPU")
    block_size = forms.TypedChoiceField(
        choices=BLOCK_SIZE_CHOICES, coerce=int, empty_value=None, required=False, label="Block size (tokens)"
    )

    class Meta:
        model = Scenario
        fields = ("name", "model", "gpu", *SCENARIO_INPUT_FIELDS, "notes")
        labels = {
            "gpu_count": "GPUs",
            "tensor_parallel_size": "Tensor parallel (tp)",
            "pipeline_parallel_size": "Pipeline parallel (pp)",
            "kv_cache_dtype": "KV cache dtype",
            "gpu_memory_utilization": "gpu_memory_utilization",
            "max_model_len": "max_model_len (tokens)",
            "max_num_batched_tokens": "max_num_batched_tokens",
            "weights_gib": "Weights (GiB)",
            "activation_gib": "Activation peak (GiB)",
            "non_torch_gib": "Non-torch memory (GiB)",
            "kv_cache_memory_gib": "KV cache memory (GiB)",
            "target_tpot_ms": "Target TPOT (ms)",
            "target_ttft_ms": "Target TTFT (ms)",
            "enable_prefix_caching": "Prefix caching",
            "num_speculative_tokens": "Speculative tokens (MTP)",
        }
        help_texts = SCENARIO_HELP
        widgets = {"notes": forms.Textarea(attrs={"rows": 2})}

    def __init__(self, *args: Any, preview: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.plan: Plan | None = None
        if preview:
            self.fields["name"].required = False
        if self.instance.pk:
            # The choice fields are keyed by slug, model_to_dict gives primary keys.
            self.initial["model"] = self.instance.model.slug
            self.initial["gpu"] = self.instance.gpu.slug
        # A stored block size outside the usual list stays selectable rather than silently reset.
        current = self.initial.get("block_size")
        if current and str(current) not in dict(BLOCK_SIZE_CHOICES):
            self.fields["block_size"].choices = [*BLOCK_SIZE_CHOICES, (str(current), str(current))]
        self.fields["engine_version"].widget.attrs["list"] = "engine-versions"
        # Blank means none (older clients and saved form posts do not send it).
        self.fields["num_speculative_tokens"].required = False
        prefix_caching = self.fields["enable_prefix_caching"].widget
        if isinstance(prefix_caching, forms.NullBooleanSelect):
            prefix_caching.choices = [("unknown", "vLLM default"), ("true", "on"), ("false", "off")]
        self._apply_model_minimums()
        for name in ("gpu_memory_utilization",):
            self.fields[name].widget.attrs.setdefault("step", "0.01")
        for name in ("weights_gib", "activation_gib", "non_torch_gib", "kv_cache_memory_gib"):
            self.fields[name].widget.attrs.setdefault("step", "any")

    def _apply_model_minimums(self) -> None:
        # PositiveIntegerField's form field allows 0; the model's own minimum (1 for tp, concurrency, ...) is the
        # one to tell the user, once, before the engine sees the value.
        for name, field in self.fields.items():
            if not isinstance(field, forms.IntegerField) or name not in SCENARIO_INPUT_FIELDS:
                continue
            minimums = [
                v.limit_value for v in Scenario._meta.get_field(name).validators if isinstance(v, MinValueValidator)
            ]
            if not minimums:
                continue
            field.min_value = max(minimums)
            field.validators = [v for v in field.validators if not isinstance(v, MinValueValidator)]
            field.validators.append(MinValueValidator(field.min_value))
            field.widget.attrs["min"] = field.min_value

    def field_groups(self) -> list[tuple[FieldGroup, list[forms.BoundField], bool]]:
        """(group, bound fields, open): advanced groups unfold when they hold a value or an error."""
        groups = []
        for group in SCENARIO_FIELD_GROUPS:
            fields = [self[name] for name in group.fields]
            is_open = not group.advanced or any(f.errors or f.value() not in (None, "") for f in fields)
            groups.append((group, fields, is_open))
        return groups

    def scenario_data(self) -> dict[str, Any]:
        """The cleaned values a scenario service writes (planner.services.scenario_create and friends)."""
        return {name: self.cleaned_data.get(name) for name in SCENARIO_WRITE_FIELDS}

    def clean_num_speculative_tokens(self) -> int:
        value = self.cleaned_data.get("num_speculative_tokens")
        return int(value) if value is not None else 0

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if self.errors or "model" not in cleaned or "gpu" not in cleaned:
            return cleaned  # the engine can only judge inputs that each passed their own checks
        profile = cleaned["model"]
        try:
            model = profile.spec()
        except SizingInputError as error:
            # A stored config the engine no longer reads: the fault is the model's, not the inputs'.
            self.add_error("model", [f"{profile}: {key}: {message}" for key, message in error.errors.items()])
            return cleaned
        try:
            inputs = plan_inputs_from_values(model=model, gpu=cleaned["gpu"].spec(), values=cleaned)
            self.plan = compute_plan(inputs)
        except SizingInputError as error:
            add_sizing_errors(self, error)
        return cleaned


def add_sizing_errors(form: forms.Form, error: SizingInputError, *, aliases: dict[str, str] | None = None) -> None:
    """Put each of the engine's ``{field: message}`` on the form field it names, else above the form."""
    aliases = aliases or {}
    for field, message in error.errors.items():
        target = aliases.get(field, field)
        if target in form.fields:
            form.add_error(target, message)
        else:
            form.add_error(None, f"{field}: {message}")


def _read_json_source(*, upload: UploadedFile | None, text: str) -> tuple[Any, str | None]:
    """The JSON document from an upload (preferred) or pasted text, or an error message."""
    if upload is not None:
        if upload.size is not None and upload.size > MAX_CONFIG_BYTES:
            return None, f"The file is larger than {MAX_CONFIG_BYTES // 1000} kB."
        raw = upload.read()
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            return None, "The file is not UTF-8 text."
    if not text.strip():
        return None, "Paste the JSON or upload a file."
    if len(text) > MAX_CONFIG_BYTES:
        return None, f"The text is larger than {MAX_CONFIG_BYTES // 1000} kB."
    try:
        return json.loads(text), None
    except RecursionError:
        return None, "Not valid JSON: nested too deeply."
    except ValueError as error:
        return None, f"Not valid JSON: {error}"


class CustomModelForm(forms.Form):
    """A model from a pasted or uploaded HF config.json; planner.services checks it (the API's import does too)."""

    name = forms.CharField(max_length=200)
    slug = forms.SlugField(
        max_length=100, required=False, help_text="Blank: made from the name (a number is added if taken)."
    )
    hf_id = forms.RegexField(
        HF_REPO_ID,
        label="Hugging Face id",
        max_length=200,
        required=False,
        help_text="The repo the config.json came from (org/name), named by the vllm serve command. "
        "Blank: the config's _name_or_path when it names one.",
        error_messages={"invalid": "Give the repo id as org/name, e.g. Qwen/Qwen3-8B."},
    )
    config_text = forms.CharField(
        label="config.json", required=False, widget=forms.Textarea(attrs={"rows": 14, "spellcheck": "false"})
    )
    config_file = forms.FileField(label="…or upload config.json", required=False)
    params_b = forms.FloatField(
        label="Parameters (billions)", required=False, min_value=0.001, max_value=1e6, help_text="Blank: estimated."
    )
    params_active_b = forms.FloatField(
        label="Active parameters (billions, MoE)", required=False, min_value=0.001, max_value=1e6
    )
    notes = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.spec: ModelSpec | None = None
        self.config: dict[str, Any] | None = None
        self._config_field = "config_text"

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        config_field = self._config_field = "config_file" if cleaned.get("config_file") else "config_text"
        config, message = _read_json_source(upload=cleaned.get("config_file"), text=cleaned.get("config_text") or "")
        if message:
            self.add_error(config_field, message)
            return cleaned
        if not isinstance(config, dict):
            self.add_error("config_text", "config.json must be a JSON object ({…}).")
            return cleaned
        if self.errors:
            return cleaned
        try:
            self.spec = services.custom_model_spec(
                config=config,
                name=cleaned["name"],
                params_b=cleaned.get("params_b"),
                params_active_b=cleaned.get("params_active_b"),
            )
        except SizingInputError as error:
            self.add_service_errors(error)
            return cleaned
        self.config = config
        if not cleaned.get("hf_id"):
            cleaned["hf_id"] = config_hf_id(config) or ""
        return cleaned

    def add_service_errors(self, error: SizingInputError) -> None:
        """The service's ``{field: message}`` on this form's fields (``config`` is the text box or the upload)."""
        add_sizing_errors(self, error, aliases={"config": self._config_field})


class ScenarioImportForm(forms.Form):
    """A scenario exported as JSON, pasted or uploaded; validated exactly like the scenario form."""

    document = forms.CharField(
        label="Scenario JSON", required=False, widget=forms.Textarea(attrs={"rows": 12, "spellcheck": "false"})
    )
    file = forms.FileField(label="…or upload the exported file", required=False)
    import_duplicate = forms.BooleanField(
        label="Import even if the same scenario exists",
        required=False,
        help_text="A scenario with the same name, model, GPU and inputs is refused unless this is ticked.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.scenario_form: ScenarioForm | None = None

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        source_field = "file" if cleaned.get("file") else "document"
        doc, message = _read_json_source(upload=cleaned.get("file"), text=cleaned.get("document") or "")
        if message:
            self.add_error(source_field, message)
            return cleaned
        # Text PostgreSQL cannot hold (NUL, a lone surrogate) would fail in a slug lookup or on save.
        problem = document_problem(doc)
        if problem:
            self.add_error(source_field, f"The document {problem}." if problem.startswith("is") else problem)
            return cleaned
        errors = _export_document_errors(doc)
        if errors:
            for error in errors:
                self.add_error(source_field, error)
            return cleaned
        inputs = doc.get("inputs") or {}
        data = {
            "name": doc["name"],
            "notes": doc.get("notes") or "",
            "model": doc["model"],
            "gpu": doc["gpu"],
            # A missing input takes the model's default (a hand-written file may give only a few).
            **{
                field: _form_value(inputs[field] if field in inputs else Scenario._meta.get_field(field).get_default())
                for field in SCENARIO_INPUT_FIELDS
            },
        }
        form = ScenarioForm(data=data)
        if not form.is_valid():
            for field, messages in form.errors.items():
                label = "scenario" if field == "__all__" else field
                for message in messages:
                    self.add_error(source_field, f"{label}: {message}")
            return cleaned
        if not cleaned.get("import_duplicate"):
            existing = scenario_duplicates(data=form.scenario_data()).first()
            if existing is not None:
                self.add_error(
                    source_field,
                    f"A scenario with the same name and inputs exists already: “{existing.name}” (#{existing.pk}, "
                    f"owner {existing.owner.get_username()}). Tick “{self.fields['import_duplicate'].label}” to "
                    "import it again.",
                )
                return cleaned
        self.scenario_form = form
        return cleaned


def _export_document_errors(doc: Any) -> list[str]:
    if not isinstance(doc, dict):
        return ["The document must be a JSON object."]
    errors = []
    if doc.get("format") not in (None, EXPORT_FORMAT):
        errors.append(f"format: expected {EXPORT_FORMAT!r}, got {doc.get('format')!r}")
    # A file without a version is hand-written in today's shape; any other version is one kvdash cannot read.
    version = doc.get("version", EXPORT_VERSION)
    if isinstance(version, bool) or version != EXPORT_VERSION:
        errors.append(f"version: this kvdash reads version {EXPORT_VERSION} files, got {version!r}")
    for key in ("name", "model", "gpu"):
        if not isinstance(doc.get(key), str) or not doc.get(key):
            errors.append(f"{key}: required (a string)")
    if "inputs" in doc and not isinstance(doc["inputs"], dict):
        errors.append("inputs: must be an object")
    elif isinstance(doc.get("inputs"), dict):
        unknown = sorted(set(doc["inputs"]) - set(SCENARIO_INPUT_FIELDS))
        if unknown:
            errors.append(f"inputs: unknown fields {', '.join(unknown)}")
    if errors:
        return errors
    if not ModelProfile.objects.filter(slug=doc["model"]).exists():
        errors.append(f"model: no model with slug {doc['model']!r}")
    if not GpuProfile.objects.filter(slug=doc["gpu"]).exists():
        errors.append(f"gpu: no GPU with slug {doc['gpu']!r}")
    return errors


def _form_value(value: Any) -> Any:
    """A JSON value as form data: null means blank; lists and objects are passed on for the field to reject."""
    if value is None:
        return ""
    if isinstance(value, bool | dict | list):
        return json.dumps(value)
    return value
