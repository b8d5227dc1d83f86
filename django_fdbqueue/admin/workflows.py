"""The admin's workflow pages: workflows by status (a tab each), one workflow's graph as a
table, and its cancel button.

A workflow is its members' task queues' (``WorkflowResult.queues``), as over REST: ``view`` on
every one of them shows it (one the user may not view is a 404 here, and left out of the list),
``consume`` on every one of them cancels it (as retrying a task needs ``consume`` on its queue).
The pages, and who may use them: the admin guide (docs/howto/admin.md), "Workflows".
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect

from django_fdbqueue import access
from django_fdbqueue.access import events
from django_fdbqueue.tasks.exceptions import InvalidWorkflow, WorkflowDoesNotExist
from django_fdbqueue.tasks.queues import configured_backends
from django_fdbqueue.tasks.workflows import STATUSES, WorkflowResult, get_workflow, list_workflows, workflow_counts
from django_fdbqueue.tasks.workflows import cancel_workflow as cancel

from .pages import AdminPages, store_guard

WORKFLOWS_PER_PAGE = 25
NODES_PER_PAGE = 50
#: Predecessors listed per node in the graph's table; more are counted, not listed.
PREDECESSORS_SHOWN = 20
MAX_ID_LENGTH = 200


class WorkflowAdminViews(AdminPages):
    """The workflow pages; they share the queue pages' helpers (permissions, addresses, errors)."""

    def _may_on(self, request: HttpRequest, action: str, queues: set[str]) -> bool:
        if not queues:
            return access.can_every(request.user, action)
        return all(access.can(request.user, action, queue) for queue in queues)

    def _workflow(self, request: HttpRequest, backend: str, workflow_id: str) -> tuple[WorkflowResult, set[str]]:
        """The workflow and its queues; 404 when there is none or the user may not view it."""
        if not workflow_id or len(workflow_id) > MAX_ID_LENGTH:
            raise Http404("No such workflow.")
        try:
            workflow = get_workflow(workflow_id, backend=backend)
        except WorkflowDoesNotExist:
            raise Http404("No such workflow (it may have been forgotten after its retention).") from None
        queues = workflow.queues()
        if not self._may_on(request, "view", queues):
            events.emit(events.REFUSED, "view")
            raise Http404("No such workflow.")
        return workflow, queues

    @store_guard
    def workflows(self, request: HttpRequest) -> HttpResponse:
        """One backend's workflows in one status (a tab each), oldest first, paged."""
        self.require(request, "view")
        backends = sorted(configured_backends().ours)
        backend = request.GET.get("backend") or (backends[0] if backends else "default")
        status = request.GET.get("status") or "RUNNING"
        if backend not in backends or status not in STATUSES:
            raise Http404("No such backend or status.")
        try:
            page = list_workflows(
                status, backend=backend, after=request.GET.get("after") or None, limit=WORKFLOWS_PER_PAGE
            )
        except InvalidWorkflow:
            messages.warning(request, "That page link is not valid; showing the first page.")
            page = list_workflows(status, backend=backend, limit=WORKFLOWS_PER_PAGE)
        sees_all = access.can_every(request.user, "view")
        rows = [w for w in page.items if sees_all or self._may_on(request, "view", w.queues())]
        counts = workflow_counts(backend)
        tabs = [(name, counts.get(name, 0), self.url("workflows", backend=backend, status=name)) for name in STATUSES]
        context = self.context(
            request,
            "Workflows",
            backend=backend,
            backends=backends,
            status=status,
            tabs=tabs,
            rows=rows,
            next_page_url=self.url("workflows", backend=backend, status=status, after=page.next) if page.next else None,
        )
        return self.render(request, "workflow_list.html", context)

    @store_guard
    def workflow_detail(self, request: HttpRequest, backend: str, workflow_id: str) -> HttpResponse:
        """A workflow's header and its graph as a table, a page of nodes at a time."""
        self.require(request, "view")
        workflow, queues = self._workflow(request, backend, workflow_id)
        after_text = request.GET.get("after", "")
        after = int(after_text) if after_text.isdigit() else None
        nodes = workflow.nodes(after=after, limit=NODES_PER_PAGE)
        rows = [(node, self._predecessors(workflow, node)) for node in nodes]
        last = nodes[-1].index if nodes else None
        more = last is not None and last + 1 < workflow.size and len(nodes) == NODES_PER_PAGE
        context = self.context(
            request,
            f"Workflow {workflow.name or workflow.id}",
            workflow=workflow,
            queues=sorted(queues),
            rows=rows,
            can_cancel=not workflow.is_finished and self._may_on(request, "consume", queues),
            cancel_url=self.url("workflow_cancel", backend, workflow.id),
            workflows_url=self.url("workflows", backend=backend, status=workflow.status),
            next_page_url=self.url("workflow_detail", backend, workflow.id, after=str(last)) if more else None,
        )
        return self.render(request, "workflow_detail.html", context)

    @staticmethod
    def _predecessors(workflow: WorkflowResult, node: Any) -> str:
        if not node.predecessor_count:
            return "—"
        shown = workflow.predecessors(node.index, limit=PREDECESSORS_SHOWN)
        text = ", ".join(str(index) for index in shown)
        extra = node.predecessor_count - len(shown)
        return f"{text} (+{extra} more)" if extra > 0 else text

    @store_guard
    def workflow_cancel(self, request: HttpRequest, backend: str, workflow_id: str) -> HttpResponse:
        """Cancel (POST only): members not started never run; ``consume`` on every member queue."""
        self.require(request, "consume")
        workflow, queues = self._workflow(request, backend, workflow_id)
        if not self._may_on(request, "consume", queues):
            events.emit(events.REFUSED, "consume")
            raise PermissionDenied
        back = self.url("workflow_detail", backend, workflow.id)
        if request.method != "POST":
            return HttpResponseRedirect(back)
        done = cancel(workflow.id, backend=backend)
        for queue in sorted(queues):
            self.audit(request, "consume", queue, operation="workflow_cancel", workflow=workflow.id)
        if done.status == "CANCELLED":
            messages.success(request, f"Workflow {done.id} is cancelled: its members not started will not run.")
        else:
            messages.warning(request, f"Workflow {done.id} had already finished ({done.status}); nothing was changed.")
        return HttpResponseRedirect(back)
