"""The queues in Django's admin: an entry on the admin index whose pages are our own views.

The placeholder ``Queue`` model gives the admin its section ("FDB queues > Queues") and its
permissions; ``QueueAdmin.get_urls`` swaps the model admin's SQL-backed views for the views in
``admin_views``, at the addresses the admin expects (``admin:fdbqueue_queue_changelist``,
``_add``, ``_change``, ``_delete``) so the index's links and breadcrumbs lead to them.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, path, register_converter, reverse

from .admin_views import QueueAdminViews
from .models import Queue
from .paths import QueueNameConverter

register_converter(QueueNameConverter, "fdbqueue_name")


@admin.register(Queue)
class QueueAdmin(admin.ModelAdmin):
    """Staff users with the ``fdbqueue`` permissions list, browse and operate the queues."""

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
            path("<fdbqueue_name:name>/max-attempts/", wrap(views.set_max_attempts),
                 name=f"{prefix}_max_attempts"),
            path("<fdbqueue_name:name>/dead/<str:item_id>/requeue/", wrap(views.dead_requeue),
                 name=f"{prefix}_dead_requeue"),
            path("<fdbqueue_name:name>/dead/<str:item_id>/delete/", wrap(views.dead_delete),
                 name=f"{prefix}_dead_delete"),
            # Like the admin: a bare object address leads to its change page.
            path("<fdbqueue_name:name>/", wrap(self._to_change), name=f"{prefix}_redirect"),
        ]

    def _to_change(self, request: HttpRequest, name: str) -> HttpResponse:
        target = reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_change", args=(name,),
                         current_app=self.admin_site.name)
        return HttpResponseRedirect(target)

    # The model has no table: nothing may ever try to read or write one through the admin.
    def get_queryset(self, request: HttpRequest) -> Any:
        return Queue.objects.none()
