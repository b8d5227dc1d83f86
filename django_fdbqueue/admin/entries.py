"""The app's entries beside Queues on the admin index and in its sidebar: Tasks, Workflows, Schedules,
Activity and API tokens, where staff look for them (not only as buttons on the queue list).

Django lists a registered model's admin there, so each entry is a proxy of the placeholder
(``models``) whose admin leads to the page and reads or writes nothing. An entry is shown to the
users the page itself lets in, by the page's own rule: ``view`` on some queue (a grant or the
queue model's permission, ``QueueAdmin.has_view_permission``) for tasks, workflows, schedules
and activity; knox's view (or change) permission for the tokens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, path, re_path, reverse

from django_fdbqueue.models import ActivityEntry, Queue, SchedulesEntry, TasksEntry, TokensEntry, WorkflowsEntry

from .pages import tasks_framework_available

Rule = Callable[[HttpRequest], bool]


# Django's ModelAdmin and ModelForm take a type argument for type checkers only, not at run time.
if TYPE_CHECKING:
    _EntryModelAdmin = admin.ModelAdmin[Queue]
else:
    _EntryModelAdmin = admin.ModelAdmin


class PageEntryAdmin(_EntryModelAdmin):
    """One entry: its index and sidebar link, and every address under it, lead to ``page``
    (the Queue admin's address name, such as ``"tasks"``), for the users ``rule`` allows."""

    page = ""
    rule: Rule = staticmethod(lambda request: False)

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view(self._to_page)
        return [path("", view, name=f"{self.opts.app_label}_{self.opts.model_name}_changelist"), re_path(r"^.*$", view)]

    def _to_page(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        # The page checks its permissions itself: a user the entry is not shown to gets its 403.
        return HttpResponseRedirect(reverse(f"admin:fdbqueue_queue_{self.page}", current_app=self.admin_site.name))

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self.rule(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.rule(request)

    # Nothing to add, change or delete here: the index shows a "View" link and no "Add".
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def _entry(page: str, rule: Rule) -> type[PageEntryAdmin]:
    return type(f"{page.capitalize()}EntryAdmin", (PageEntryAdmin,), {"page": page, "rule": staticmethod(rule)})


def register_entries(site: admin.AdminSite) -> None:
    """Register the entries on ``site``, after its Queue admin: tasks only with the Tasks
    framework, tokens only with knox (as their pages)."""
    from django.apps import apps

    queue_admin = site._registry[Queue]
    may_view_queues: Rule = queue_admin.has_view_permission
    entries: dict[type, type[PageEntryAdmin]] = {
        SchedulesEntry: _entry("schedules", may_view_queues),
        ActivityEntry: _entry("activity", may_view_queues),
    }
    if tasks_framework_available():
        entries[TasksEntry] = _entry("tasks", may_view_queues)
        entries[WorkflowsEntry] = _entry("workflows", may_view_queues)
    if apps.is_installed("knox"):
        from .tokens import TokenAdminViews

        token_pages = TokenAdminViews(queue_admin)
        entries[TokensEntry] = _entry("tokens", lambda request: token_pages.allowed(request, "view"))
    for model, model_admin in entries.items():
        if not site.is_registered(model):
            site.register(model, model_admin)
