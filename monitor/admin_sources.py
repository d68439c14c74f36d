"""Admin of Prometheus sources and targets. The bearer token is a password field that is never rendered back:
left blank on a change, the stored token is kept."""

from __future__ import annotations

from django import forms
from django.contrib import admin

from monitor.models import PrometheusSource, PrometheusTarget
from monitor.scrape.prometheus import selector_valid


class PrometheusSourceForm(forms.ModelForm):
    base_url = forms.URLField(max_length=500, assume_scheme="http", help_text="e.g. http://prometheus:9090")
    bearer_token = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Sent as Authorization: Bearer. Leave blank to keep the stored token.",
    )
    clear_bearer_token = forms.BooleanField(required=False, help_text="Remove the stored token.")

    class Meta:
        model = PrometheusSource
        fields = ["name", "base_url", "bearer_token", "clear_bearer_token", "enabled"]

    def save(self, commit: bool = True) -> PrometheusSource:
        source: PrometheusSource = super().save(commit=False)
        if self.cleaned_data.get("clear_bearer_token"):
            source.bearer_token = ""
        elif not self.cleaned_data.get("bearer_token") and source.pk:
            source.bearer_token = PrometheusSource.objects.get(pk=source.pk).bearer_token
        if commit:
            source.save()
        return source


@admin.register(PrometheusSource)
class PrometheusSourceAdmin(admin.ModelAdmin):
    form = PrometheusSourceForm
    list_display = ["name", "base_url", "enabled", "has_token"]
    search_fields = ["name", "base_url"]

    @admin.display(boolean=True, description="bearer token")
    def has_token(self, source: PrometheusSource) -> bool:
        return bool(source.bearer_token)


class PrometheusTargetForm(forms.ModelForm):
    class Meta:
        model = PrometheusTarget
        fields = ["endpoint", "source", "selector"]

    def clean_selector(self) -> str:
        selector: str = self.cleaned_data["selector"].strip()
        if not selector_valid(selector):
            raise forms.ValidationError('Label matchers in braces, e.g. {instance="10.0.0.7:8000"}.')
        return selector


@admin.register(PrometheusTarget)
class PrometheusTargetAdmin(admin.ModelAdmin):
    form = PrometheusTargetForm
    list_display = ["endpoint", "source", "selector"]
    list_select_related = ["endpoint", "source"]
