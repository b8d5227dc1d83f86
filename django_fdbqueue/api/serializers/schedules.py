"""Serializers of the schedules routes: the checks are the schedule model's own (``schedules.model``),
run here so that a malformed cron expression, an unknown time zone, a bad catch-up policy, a bad
name, an interval of zero, or both or neither of cron and interval, is a field-level 400 before
any transaction starts, coded ``invalid_schedule`` with the model's words, as in Python."""

from __future__ import annotations

from typing import Any, Callable, TypeVar

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty

from django_fdbqueue.exceptions import InvalidArgument, InvalidSchedule
from django_fdbqueue.schedules import model

from .fields import StrictFieldsMixin

NAME_REGEX = r"[A-Za-z0-9._-]{1,%d}" % model.NAME_MAX_LENGTH
TARGET_HELP = (
    'What to fire: {"kind": "push", "queue": NAME, "value": JSON, "priority": INT} or '
    '{"kind": "task", "task": "dotted.path", "backend": ALIAS, "args": [...], "kwargs": {...}}.'
)


T = TypeVar("T")


def _checked(check: Callable[..., T], *args: Any) -> T:
    """Run a model check; its refusal becomes the field's 400, coded ``invalid_schedule`` whatever
    part of the definition it was about (a queue name inside the target included)."""
    try:
        return check(*args)
    except InvalidArgument as error:
        raise serializers.ValidationError(error.message, code=InvalidSchedule.code) from None


def _refused(error: InvalidArgument) -> serializers.ValidationError:
    """A model check's refusal that is about two fields at once, on the field the model names."""
    field = error.context.get("field", "cron")
    return serializers.ValidationError({field: [error.message]}, code=InvalidSchedule.code)


class CatchUpField(serializers.ChoiceField):
    """One of the catch-up policies; any other value, null included, is the model's refusal."""

    def run_validation(self, data: Any = empty) -> Any:
        return super().run_validation(data) if data is empty else _checked(model.check_catch_up, data)


class NameField(serializers.RegexField):
    """A schedule's name; any other value, blank or null included, is the model's refusal."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(rf"^{NAME_REGEX}\Z", trim_whitespace=False, **kwargs)

    def run_validation(self, data: Any = empty) -> Any:
        return super().run_validation(data) if data is empty else _checked(model.check_name, data)


@extend_schema_field(
    {"type": "object", "required": ["kind"], "properties": {"kind": {"type": "string", "enum": ["push", "task"]}}}
)
class TargetField(serializers.JSONField):
    """A JSON object; what else it needs depends on its kind, which the model checks."""


class _DefinitionFields(StrictFieldsMixin, serializers.Serializer[Any]):
    target = TargetField(help_text=TARGET_HELP)
    cron = serializers.CharField(
        required=False,
        allow_null=True,
        trim_whitespace=False,
        min_length=1,
        max_length=200,
        help_text="A cron expression (five fields, or six with seconds), e.g. */5 * * * *.",
    )
    interval = serializers.FloatField(
        required=False,
        allow_null=True,
        help_text=f"Seconds between runs, {model.MIN_INTERVAL} to {model.MAX_INTERVAL}.",
    )
    tz = serializers.CharField(
        required=False, trim_whitespace=False, min_length=1, max_length=100, help_text="IANA time zone; default UTC."
    )
    catch_up = CatchUpField(
        choices=model.CATCH_UP_POLICIES,
        required=False,
        help_text="Missed occurrences: last (default), all (bounded) or none.",
    )

    def validate_target(self, value: Any) -> dict[str, Any]:
        return _checked(model.check_target, value)

    def validate_cron(self, value: Any) -> Any:
        return value if value is None else _checked(model.check_trigger, value, None)[0]

    def validate_interval(self, value: Any) -> Any:
        return value if value is None else _checked(model.check_trigger, None, value)[1]

    def validate_tz(self, value: Any) -> str:
        return _checked(model.check_tz, value)


class ScheduleCreateSerializer(_DefinitionFields):
    """POST schedules/."""

    name = NameField(help_text=f"1 to {model.NAME_MAX_LENGTH} letters, digits, '.', '_' or '-'.")
    paused = serializers.BooleanField(required=False, default=False)

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        """Exactly one of cron and interval, refused as the Python API refuses it (same code and words)."""
        try:
            model.check_trigger(data.get("cron"), data.get("interval"))
        except InvalidArgument as error:
            raise _refused(error) from None
        return data


class ScheduleUpdateSerializer(_DefinitionFields):
    """PATCH schedules/{name}/: the definition fields to change; the others stay."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, partial=True, **kwargs)


class LastResultSerializer(serializers.Serializer[Any]):
    status = serializers.ChoiceField(choices=("ok", "error", "skipped"))
    detail = serializers.CharField()
    item = serializers.CharField(allow_null=True, help_text="The pushed item's id.")
    task_result = serializers.CharField(allow_null=True, help_text="The enqueued task's result id.")
    fired = serializers.IntegerField(help_text="Occurrences fired.")
    skipped = serializers.BooleanField(help_text="Whether due occurrences were skipped (catch-up policy).")
    at = serializers.DateTimeField()


class ScheduleSerializer(serializers.Serializer[Any]):
    """A schedule as the API shows it."""

    name = serializers.CharField()
    target = serializers.JSONField(help_text=TARGET_HELP)
    cron = serializers.CharField(allow_null=True)
    interval = serializers.FloatField(allow_null=True)
    tz = serializers.CharField()
    catch_up = serializers.ChoiceField(choices=model.CATCH_UP_POLICIES)
    paused = serializers.BooleanField()
    declared = serializers.BooleanField(help_text="Declared in code (synced by the scheduler).")
    next_run = serializers.DateTimeField(allow_null=True, help_text="Null while paused.")
    last_run = serializers.DateTimeField(allow_null=True)
    last_result = LastResultSerializer(allow_null=True)


class FiredSerializer(serializers.Serializer[Any]):
    """What run-now did."""

    name = serializers.CharField()
    result = LastResultSerializer()
