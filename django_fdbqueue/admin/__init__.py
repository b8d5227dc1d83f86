"""Everything the app shows in Django's admin: an entry on the admin index whose pages are ours.

The placeholder ``Queue`` model gives the admin its section ("FDB queues > Queues");
``QueueAdmin.get_urls`` swaps the model admin's SQL-backed views for the queue pages of
``queues`` at the addresses the admin expects, and adds the task pages (``tasks``, with the Tasks
framework, and the workflow pages, ``workflows``), the token pages (``tokens``, with knox, whose own admin ``knox`` leads to them), the
schedules page (``schedules``) and the charts (``activity``), each with its entry on the index
(``entries``). Who may do what to which queue is ``django_fdbqueue.access``'s answer.

The pages and who may use them: the admin guide (docs/howto/admin.md); the modules: the code
map (docs/explanation/code-map.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, path, register_converter, reverse

from django_fdbqueue.access.somewhere import can_somewhere
from django_fdbqueue.models import Queue, QueueGrant
from django_fdbqueue.paths import QueueNameConverter

from .entries import register_entries
from .grants import QueueGrantAdmin
from .knox import fold_knox_admin_in
from .pages import tasks_framework_available
from .queues import QueueAdminViews

register_converter(QueueNameConverter, "fdbqueue_name")


# Django's ModelAdmin and ModelForm take a type argument for type checkers only, not at run time.
if TYPE_CHECKING:
    _QueueModelAdmin = admin.ModelAdmin[Queue]
else:
    _QueueModelAdmin = admin.ModelAdmin


@admin.register(Queue)
class QueueAdmin(_QueueModelAdmin):
    """Staff users list, browse and operate the queues their grants (or permissions) allow.

    The model-level answers below say whether the user holds an action on *some* queue: they
    decide the admin index's entry and its links; each page then checks the queue it is about.
    """

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self.has_view_permission(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return can_somewhere(request.user, "view")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return can_somewhere(request.user, "manage")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return any(can_somewhere(request.user, action) for action in ("push", "consume", "manage"))

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return can_somewhere(request.user, "delete")

    def get_urls(self) -> list[URLPattern]:
        views = QueueAdminViews(self)
        wrap = self.admin_site.admin_view  # login + staff check; our views check permissions
        prefix = f"{self.opts.app_label}_{self.opts.model_name}"
        return [
            path("", wrap(views.changelist), name=f"{prefix}_changelist"),
            path("add/", wrap(views.add), name=f"{prefix}_add"),
            path("<fdbqueue_name:name>/change/", wrap(views.change), name=f"{prefix}_change"),
            path("<fdbqueue_name:name>/push/", wrap(views.push), name=f"{prefix}_push"),
            path("<fdbqueue_name:name>/pop/", wrap(views.pop), name=f"{prefix}_pop"),
            path("<fdbqueue_name:name>/peek/", wrap(views.peek), name=f"{prefix}_peek"),
            path("<fdbqueue_name:name>/clear/", wrap(views.clear), name=f"{prefix}_clear"),
            path("<fdbqueue_name:name>/delete/", wrap(views.delete), name=f"{prefix}_delete"),
            path("<fdbqueue_name:name>/max-attempts/", wrap(views.set_max_attempts), name=f"{prefix}_max_attempts"),
            path(
                "<fdbqueue_name:name>/dead/<str:item_id>/requeue/",
                wrap(views.dead_requeue),
                name=f"{prefix}_dead_requeue",
            ),
            path(
                "<fdbqueue_name:name>/dead/<str:item_id>/delete/", wrap(views.dead_delete), name=f"{prefix}_dead_delete"
            ),
            *self._task_urls(prefix),
            *self._token_urls(prefix),
            *self._schedule_urls(prefix),
            *self._activity_urls(prefix),
            # Like the admin: a bare object address leads to its change page.
            path("<fdbqueue_name:name>/", wrap(self._to_change), name=f"{prefix}_redirect"),
        ]

    def _task_urls(self, prefix: str) -> list[URLPattern]:
        """The task pages, when the Tasks framework is there to have tasks.

        They come after the queue pages, so a queue named "tasks" keeps its pages at
        ``tasks/change/`` and so on; only its bare ``tasks/`` redirect gives way to the task list.
        """
        if not tasks_framework_available():
            return []
        from .tasks import TaskAdminViews

        from .workflows import WorkflowAdminViews

        views = TaskAdminViews(self)
        flows = WorkflowAdminViews(self)
        wrap = self.admin_site.admin_view
        return [
            path("workflows/", wrap(flows.workflows), name=f"{prefix}_workflows"),
            path(
                "workflows/<str:backend>/<str:workflow_id>/",
                wrap(flows.workflow_detail),
                name=f"{prefix}_workflow_detail",
            ),
            path(
                "workflows/<str:backend>/<str:workflow_id>/cancel/",
                wrap(flows.workflow_cancel),
                name=f"{prefix}_workflow_cancel",
            ),
            path("tasks/", wrap(views.tasks), name=f"{prefix}_tasks"),
            path("tasks/queue/<str:backend>/<str:queue_name>/", wrap(views.task_list), name=f"{prefix}_task_list"),
            path("tasks/<str:result_id>/", wrap(views.task_detail), name=f"{prefix}_task_detail"),
            path("tasks/<str:result_id>/retry/", wrap(views.task_retry), name=f"{prefix}_task_retry"),
        ]

    # -- API tokens (django_fdbqueue.tokens): only when knox is installed -----------------------

    def _token_urls(self, prefix: str) -> list[URLPattern]:
        """The API token pages, when knox is in INSTALLED_APPS (see ``tokens``).

        Like the task pages they come after the queue pages: a queue named "tokens" keeps
        ``tokens/change/`` and the rest, only its bare ``tokens/`` redirect gives way.
        """
        from django.apps import apps

        if not apps.is_installed("knox"):
            return []
        from .tokens import TokenAdminViews

        views = TokenAdminViews(self)
        wrap = self.admin_site.admin_view
        return [
            path("tokens/", wrap(views.token_list), name=f"{prefix}_tokens"),
            path("tokens/create/", wrap(views.token_create), name=f"{prefix}_token_create"),
            path(
                "tokens/user/<str:user_id>/revoke-all/", wrap(views.token_revoke_all), name=f"{prefix}_token_revoke_all"
            ),
            path("tokens/<str:prefix>/revoke/", wrap(views.token_revoke), name=f"{prefix}_token_revoke"),
        ]

    def _schedule_urls(self, prefix: str) -> list[URLPattern]:
        """The periodic schedules page (``schedules``); like the task pages, after the queue pages."""
        from .schedules import ScheduleAdminViews

        views = ScheduleAdminViews(self)
        wrap = self.admin_site.admin_view
        return [
            path("schedules/", wrap(views.schedule_list), name=f"{prefix}_schedules"),
            path("schedules/<str:name>/edit/", wrap(views.schedule_edit), name=f"{prefix}_schedule_edit"),
            path("schedules/<str:name>/action/", wrap(views.schedule_action), name=f"{prefix}_schedule_action"),
        ]

    def _activity_urls(self, prefix: str) -> list[URLPattern]:
        """The activity charts page and their JSON (``activity``); like the task pages, after the queue pages."""
        from .activity import ActivityAdminViews

        views = ActivityAdminViews(self)
        wrap = self.admin_site.admin_view
        return [
            path("activity/", wrap(views.activity_page), name=f"{prefix}_activity"),
            path("activity/data/", wrap(views.activity_data), name=f"{prefix}_activity_data"),
        ]

    def _to_change(self, request: HttpRequest, name: str) -> HttpResponse:
        target = reverse(
            f"admin:{self.opts.app_label}_{self.opts.model_name}_change", args=(name,), current_app=self.admin_site.name
        )
        return HttpResponseRedirect(target)

    # The model has no table: nothing may ever try to read or write one through the admin.
    def get_queryset(self, request: HttpRequest) -> Any:
        return Queue.objects.none()


admin.site.register(QueueGrant, QueueGrantAdmin)
fold_knox_admin_in(admin.site)
register_entries(admin.site)
