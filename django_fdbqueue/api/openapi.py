"""drf-spectacular extensions: rules the serializers enforce that the generated schema left out.

A client that trusts the schema must not be refused for sending what it allows, yet
drf-spectacular cannot see rules that live in our own field and serializer classes
(``StrictFieldsMixin``, ``SecondsField``, the push's two body forms, DRF's reading of empty query
parameters). So each is added here, where the class that enforces it is matched; the last two
are ``QueueAutoSchema``'s, which the viewset names as its schema. policy.py imports this module;
defining the extension classes registers them.

Each rule, and the fuzzing that found them (tests/test_api_fuzz.py): the docs' reliability page,
"What these runs found, and what was fixed" (docs/explanation/reliability.md).
"""

from __future__ import annotations

from typing import Any, cast

from drf_spectacular.extensions import OpenApiSerializerExtension, OpenApiSerializerFieldExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import force_instance
from drf_spectacular.settings import spectacular_settings
from drf_spectacular.utils import PolymorphicProxySerializer
from rest_framework import serializers

# ignore[no-untyped-call] below: drf-spectacular leaves these (and __init_subclass__) unannotated.


class StrictSerializerExtension(OpenApiSerializerExtension):  # type: ignore[no-untyped-call]
    """Request bodies whose unknown fields are a 400 say so, and bound their nested lists."""

    target_class = "django_fdbqueue.api.serializers.fields.StrictFieldsMixin"
    match_subclasses = True

    def map_serializer(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        schema = cast("dict[str, Any]", auto_schema._map_serializer(self.target, direction, bypass_extensions=True))
        schema["additionalProperties"] = False
        for name, field in self.target.fields.items():
            prop = schema.get("properties", {}).get(name)
            if isinstance(field, serializers.ListSerializer) and isinstance(prop, dict):
                if not field.allow_empty:
                    prop.setdefault("minItems", 1)
                max_length = getattr(field, "max_length", None)  # DRF's, missing from its stubs
                if max_length is not None:
                    prop.setdefault("maxItems", max_length)
        return schema


class SecondsFieldExtension(OpenApiSerializerFieldExtension):  # type: ignore[no-untyped-call]
    """A number of seconds that must be more than 0 is documented as such, not as "at least 0";
    an old spelling kept for compatibility is documented as deprecated."""

    target_class = "django_fdbqueue.api.serializers.fields.SecondsField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        schema = cast(
            "dict[str, Any]", auto_schema._map_serializer_field(self.target, direction, bypass_extensions=True)
        )
        if getattr(self.target, "positive", False):
            if spectacular_settings.OAS_VERSION.startswith("3.0"):
                schema["minimum"] = 0
                schema["exclusiveMinimum"] = True
            else:  # OpenAPI 3.1 and later: JSON Schema's numeric form
                schema.pop("minimum", None)
                schema["exclusiveMinimum"] = 0
        if getattr(self.target, "deprecated", False):
            schema["deprecated"] = True
        return schema


class QueueAutoSchema(AutoSchema):
    """drf-spectacular's AutoSchema, saying that query parameters may be sent empty and that a
    request body whose every form has a required field is required."""

    def _get_request_for_media_type(self, serializer: Any, *args: Any, **kwargs: Any) -> Any:
        schema, required = super()._get_request_for_media_type(  # type: ignore[no-untyped-call]
            serializer, *args, **kwargs
        )
        if isinstance(serializer, PolymorphicProxySerializer):
            forms = serializer.serializers
            forms = forms.values() if isinstance(forms, dict) else forms
            required = all(
                any(field.required for field in force_instance(form).fields.values())  # type: ignore[no-untyped-call]
                for form in forms
            )
        return schema, required

    def _get_parameters(self) -> list[dict[str, Any]]:
        parameters = super()._get_parameters()
        for parameter in parameters:
            if parameter.get("in") == "query":
                parameter["allowEmptyValue"] = True
        return parameters
