"""Queue grants in the admin: which user or group may do which actions on the queues a pattern
matches (``django_fdbqueue.access``), listed by grantee, pattern and actions.

Who may edit them: superusers, and users holding the model's change permission
(``fdbqueue.change_queuegrant``), which is the right to give anyone, themselves included, any
action on any queue: grant it as you would superuser status. Bad input (a malformed pattern, no
action, a grant to nobody or to both a user and a group) is a form error and nothing is stored.
Every change is audited by ``access.audit`` (the admin log and the audit counter), in place of the
admin's own log entry, so each change is recorded once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin
from django.contrib.auth.models import AnonymousUser
from django.db.models import QuerySet
from django.http import HttpRequest

from django_fdbqueue.access import ACTIONS, audit
from django_fdbqueue.rights import join_actions
from django_fdbqueue.models import QueueGrant


# Django's ModelAdmin and ModelForm take a type argument for type checkers only, not at run time.
if TYPE_CHECKING:
    _GrantModelForm = forms.ModelForm[QueueGrant]
else:
    _GrantModelForm = forms.ModelForm
if TYPE_CHECKING:
    _GrantModelAdmin = admin.ModelAdmin[QueueGrant]
else:
    _GrantModelAdmin = admin.ModelAdmin


class QueueGrantForm(_GrantModelForm):
    """A grant, its actions as checkboxes (stored as ``"view,push"``); the model checks the rest."""

    actions = forms.MultipleChoiceField(
        choices=[(action, action) for action in ACTIONS],
        widget=forms.CheckboxSelectMultiple,
        help_text="view: list and read; push; consume: pop, claim, ack, release, extend; manage: create, "
        "settings, clear, dead letters, key limits, schedules; delete: delete the queue.",
    )

    class Meta:
        model = QueueGrant
        fields = ("user", "group", "pattern", "actions")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk and not self.is_bound:
            self.initial["actions"] = [action for action in self.instance.actions.split(",") if action]

    def clean_actions(self) -> str:
        try:
            return join_actions(self.cleaned_data["actions"])
        except ValueError as error:
            raise forms.ValidationError(str(error)) from None


def _fields(grant: QueueGrant) -> dict[str, Any]:
    return {
        "pattern": grant.pattern,
        "actions": grant.actions,
        "user": grant.user.get_username() if grant.user is not None else None,
        "group": grant.group.name if grant.group is not None else None,
    }


def _changes(request: HttpRequest, grant: QueueGrant, operation: str, before: dict[str, Any] | None = None) -> None:
    """Audit a grant's change: its values, and for an edit those it had before (``before``)."""
    detail = {"operation": operation, "grant": grant.pk, **_fields(grant)}
    if before is not None:
        detail["before"] = before
    audit.record(request, "manage", grant.pattern, detail)


class QueueGrantAdmin(_GrantModelAdmin):
    """The grants, by grantee, pattern and actions; editable by superusers and the change permission."""

    form = QueueGrantForm
    list_display = ("pattern", "actions", "user", "group", "created", "created_by")
    list_filter = ("group", ("user", admin.RelatedOnlyFieldListFilter))
    search_fields = ("pattern", "actions", "user__username", "group__name")
    ordering = ("pattern", "id")
    list_select_related = ("user", "group", "created_by")

    def _may_edit(self, request: HttpRequest) -> bool:
        opts = self.opts
        return request.user.has_perm(f"{opts.app_label}.change_{opts.model_name}")

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_view_permission(request, obj) or self._may_edit(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self._may_edit(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._may_edit(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._may_edit(request)

    def save_model(self, request: HttpRequest, obj: QueueGrant, form: Any, change: bool) -> None:
        if not change and not isinstance(request.user, AnonymousUser):  # the admin has signed in
            obj.created_by = request.user
        stored = QueueGrant.objects.select_related("user", "group").filter(pk=obj.pk).first() if change else None
        super().save_model(request, obj, form, change)
        _changes(request, obj, "update" if change else "create", _fields(stored) if stored is not None else None)

    def delete_model(self, request: HttpRequest, obj: QueueGrant) -> None:
        _changes(request, obj, "destroy")
        super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        for grant in queryset.select_related("user", "group"):
            _changes(request, grant, "destroy")
        super().delete_queryset(request, queryset)

    # access.audit writes the admin log entry of each change: the admin's own would repeat it. They
    # return no entry where Django's return one (ignore[override]): the admin never uses the value.
    def log_addition(self, request: HttpRequest, obj: Any, message: Any) -> None:  # type: ignore[override]
        return None

    def log_change(self, request: HttpRequest, obj: Any, message: Any) -> None:  # type: ignore[override]
        return None

    def log_deletion(self, request: HttpRequest, obj: Any, object_repr: str) -> None:
        return None

    def log_deletions(self, request: HttpRequest, queryset: Any) -> None:  # type: ignore[override]
        return None
