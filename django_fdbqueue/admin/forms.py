"""Forms of the admin queue pages: they turn posted text into the service's arguments.

The forms check what can be checked without the store (well-formed JSON, an integer priority in
range, a known end, a delay or an attempt limit within the service's bounds). The service
remains the authority on everything else; the views turn its errors into errors on these forms
via :func:`add_service_error`, so both kinds of mistake reach the user in the same place.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.core.validators import RegexValidator

from django_fdbqueue import exceptions, service

KIND_CHOICES = [("fifo", "FIFO (first in, first out)"), ("priority", "Priority (double-ended)")]
END_CHOICES = [("min", "Min end"), ("max", "Max end")]
PRIORITY_MIN = -(2**63)
PRIORITY_MAX = 2**63 - 1
MAX_ATTEMPTS_MIN = 1
MAX_ATTEMPTS_MAX = service.MAX_ATTEMPTS_LIMIT
DEDUP_KEY_MAX_LENGTH = 200
#: The queue page's tabs: ready items, leased and delayed items, dead letters.
VIEW_CHOICES = [("items", "Ready items"), ("scheduled", "Leased and delayed"), ("dead", "Dead letters")]

name_validator = RegexValidator(
    r"\A[A-Za-z0-9._-]{1,200}\Z",
    "Use 1 to 200 letters, digits, dots, underscores or hyphens.",
    code="invalid_queue_name",
)


class AdminForm(forms.Form):
    """Marks required fields the way the admin's stylesheet expects (bold labels)."""

    required_css_class = "required"


def _max_attempts_field(help_text: str) -> forms.IntegerField:
    """A queue's attempt limit, blank for none: the same field on the add page and the queue page."""
    return forms.IntegerField(
        required=False,
        min_value=MAX_ATTEMPTS_MIN,
        max_value=MAX_ATTEMPTS_MAX,
        label="Max attempts",
        help_text=help_text,
    )


class QueueCreateForm(AdminForm):
    """Name and kind of a new queue."""

    name = forms.CharField(
        max_length=200,
        validators=[name_validator],
        help_text="Letters, digits, “.”, “_” and “-”; up to 200 characters.",
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )
    kind = forms.ChoiceField(choices=KIND_CHOICES, initial="fifo")
    max_attempts = _max_attempts_field(
        "How many times an item may be claimed before it moves to the dead letters (1 to 1000). "
        "Leave blank for unlimited."
    )
    tenants = forms.BooleanField(
        required=False,
        label="Split by tenant",
        help_text="Every push names its tenant, and pops and claims take from the tenants in turn. Fixed at creation.",
    )


class MaxAttemptsForm(AdminForm):
    """The queue page's form that changes (or removes, when blank) a queue's attempt limit."""

    # Not marked required (it may be blank), so the label stays normal weight.
    max_attempts = _max_attempts_field(
        "Claims an item gets before it moves to the dead letters (1 to 1000). "
        "Blank: unlimited. Applies to every lease that ends from now on."
    )


class QueueFilterForm(forms.Form):
    """The list page's query string: a name prefix and the opaque cursor of the page to show."""

    # A field (the metaclass moves it to base_fields), not BaseForm's own `prefix`, which mypy sees.
    prefix = forms.CharField(required=False, max_length=200, label="Name starts with")  # type: ignore[assignment]
    cursor = forms.CharField(required=False, widget=forms.HiddenInput)


class BrowseForm(forms.Form):
    """The queue page's query string: which tab, which end to read from, the cursor of the page."""

    view = forms.ChoiceField(choices=VIEW_CHOICES, required=False)
    end = forms.ChoiceField(choices=END_CHOICES, required=False)
    cursor = forms.CharField(required=False)

    def clean_view(self) -> str:
        return self.cleaned_data.get("view") or "items"

    def clean_end(self) -> str:
        return self.cleaned_data.get("end") or "min"


class JSONValueField(forms.CharField):
    """Text holding one JSON document; cleans to the parsed value (``null`` included).

    Django's own ``forms.JSONField`` treats a parsed ``null`` as missing input; a queue item may
    legitimately be ``null``, so only an empty text box counts as missing here.
    """

    widget = forms.Textarea

    def clean(self, value: Any) -> Any:
        text = value.strip() if isinstance(value, str) else value
        if text in self.empty_values:
            if self.required:
                raise forms.ValidationError(self.error_messages["required"], code="required")
            return None
        try:
            return json.loads(text, parse_constant=_reject_constant)
        except RecursionError:
            raise forms.ValidationError("Enter valid JSON: it is nested too deeply.", code="invalid_json") from None
        except ValueError as exc:
            detail = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            where = f" (line {exc.lineno}, column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
            raise forms.ValidationError(
                "Enter valid JSON: %(detail)s%(where)s.",
                code="invalid_json",
                params={"detail": detail, "where": where},
            ) from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in JSON")


class PushForm(AdminForm):
    """A value (as JSON), for priority queues its priority, and an optional delay and dedup key."""

    value = JSONValueField(
        help_text='One JSON value, e.g. {"task": "resize", "id": 42}, "text", 7 or null.',
        widget=forms.Textarea(attrs={"rows": 4, "cols": 60, "spellcheck": "false"}),
    )
    priority = forms.IntegerField(
        initial=0,
        min_value=PRIORITY_MIN,
        max_value=PRIORITY_MAX,
        help_text="A whole number from −2⁶³ to 2⁶³−1. Lower numbers sit at the min end.",
    )
    delay = forms.FloatField(
        required=False,
        min_value=0,
        max_value=int(service.MAX_DELAY_SECONDS),
        label="Delay (seconds)",
        help_text="Optional: the item stays invisible this long (up to 366 days), then takes its place in queue order.",
    )
    dedup_key = forms.CharField(
        required=False,
        max_length=DEDUP_KEY_MAX_LENGTH,
        strip=False,  # keys are matched exactly, so the form must not trim them
        label="Dedup key",
        help_text="Optional, up to 200 characters, matched exactly: if an item pushed with this "
        "key is still queued, delayed, leased or dead, or was consumed in the last 5 minutes, "
        "nothing is added.",
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )

    def __init__(self, *args: Any, kind: str = "priority", tenants: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kind = kind
        if kind == "fifo":
            # FIFO queues take priority 0 only: offering the field would only invite an error.
            del self.fields["priority"]
        if tenants:  # a queue split by tenant: every push names its tenant
            self.fields["tenant"] = forms.CharField(
                max_length=service.TENANT_MAX_BYTES,
                strip=False,
                label="Tenant",
                help_text=f"1 to {service.TENANT_MAX_BYTES} bytes of UTF-8: whose item this is. "
                "Pops and claims take from the tenants in turn.",
                widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
            )

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data  # what Form.clean returns, typed as never None
        data.setdefault("priority", 0)
        delay = data.get("delay")
        if delay is not None and delay == int(delay):
            data["delay"] = int(delay)  # "30" means 30 seconds, not 30.0
        if not data.get("dedup_key"):
            data["dedup_key"] = None
        return data


class EndForm(forms.Form):
    """Which end to pop or peek from (the buttons post ``end=min`` or ``end=max``)."""

    end = forms.ChoiceField(choices=END_CHOICES)


class ConfirmForm(forms.Form):
    """The hidden "yes, I'm sure" of a confirmation page, so a stray POST does nothing."""

    confirm = forms.BooleanField(widget=forms.HiddenInput, initial=True)


def limit_text(max_attempts: int | None) -> str:
    """A queue's attempt limit in words, for messages."""
    if max_attempts is None:
        return "unlimited attempts"
    return f"at most {max_attempts} attempt{'s' if max_attempts != 1 else ''}"


# Which form field a service error belongs to; others become errors of the whole form.
_ERROR_FIELDS: dict[type[Exception], str] = {
    exceptions.InvalidQueueName: "name",
    exceptions.QueueAlreadyExists: "name",
    exceptions.InvalidPriority: "priority",
    exceptions.ValueTooLarge: "value",
    exceptions.InvalidValue: "value",
}
# Fields a generic InvalidArgument may name (in its context or its message), most specific first.
_ARGUMENT_FIELDS = ("max_attempts", "dedup_key", "delay", "not_before")


def add_service_error(form: forms.Form, error: exceptions.QueueError) -> None:
    """Attach a service error to the form field it concerns (or to the form as a whole)."""
    field = None
    for error_type, field_name in _ERROR_FIELDS.items():
        if isinstance(error, error_type) and field_name in form.fields:
            field = field_name
            break
    if field is None and isinstance(error, exceptions.WrongQueueKind) and "priority" in form.fields:
        field = "priority"
    if field is None and type(error) is exceptions.InvalidArgument:
        context = getattr(error, "context", {}) or {}
        message = str(error)
        for name in _ARGUMENT_FIELDS:
            named = context.get("field") == name or name in context or name in message
            if name in form.fields and named:
                field = name
                break
    form.add_error(field, forms.ValidationError(str(error), code=getattr(error, "code", "invalid")))
