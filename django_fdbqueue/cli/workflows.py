"""``manage.py fdbqueue workflows list|show|cancel``: the workflows of a Tasks backend.

Thin over ``django_fdbqueue.tasks.workflows``: ``list`` reads one status a page at a time (oldest
created first), ``show`` a workflow's header then a page of its nodes (state and attempts each),
``cancel`` stops one after a confirmation unless ``--yes``. An unknown id, status, cursor or
backend alias is exit code 2, like an unknown queue. Like every subcommand, whoever may run
``manage.py`` may run these: the queue grants are the REST API's and the admin's.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from . import confirm
from .arguments import add_paging, add_yes
from .base import ActionParser, Context, add_action, add_subcommand
from .errors import usage_error
from .output import compact_json, emit, fields, page_text, table

__all__ = ["register", "handle_list", "handle_show", "handle_cancel"]

DEFAULT_ALIAS = "default"
DEFAULT_STATUS = "RUNNING"


def register(subparsers: Any) -> None:
    """Add ``workflows`` with its actions list, show and cancel to ``manage.py fdbqueue``."""
    parser = add_subcommand(
        subparsers,
        "workflows",
        _no_action,
        help="List, show and cancel workflows (chains, groups, chords, DAGs of tasks).",
        description=(
            "The workflows enqueued on an FDBQueueBackend of TASKS: list them by status, show one\n"
            "with its nodes (each member's state and attempts), cancel one."
        ),
    )
    actions = parser.add_subparsers(
        title="actions", dest="workflows_action", metavar="ACTION", required=True, parser_class=ActionParser
    )
    listing = add_action(actions, parser, "list", handle_list, help="List the workflows in one status, oldest first.")
    listing.add_argument(
        "--status",
        default=DEFAULT_STATUS,
        type=str.upper,
        help=f"STORING, RUNNING, SUCCESSFUL, FAILED or CANCELLED. Default: {DEFAULT_STATUS}.",
    )
    listing.add_argument("--ids", action="store_true", help="Print only the ids, one per line (for scripts).")
    add_paging(listing, "workflows")
    show = add_action(actions, parser, "show", handle_show, help="Show a workflow and a page of its nodes.")
    show.add_argument("workflow_id", metavar="ID", help="The workflow's id.")
    add_paging(show, "nodes")
    cancel = add_action(
        actions, parser, "cancel", handle_cancel, help="Cancel a workflow: members not started never run."
    )
    cancel.add_argument("workflow_id", metavar="ID", help="The workflow's id.")
    add_yes(cancel, "cancelling")
    for action in (listing, show, cancel):
        action.add_argument(
            "--backend",
            metavar="ALIAS",
            default=DEFAULT_ALIAS,
            help=f"The TASKS alias the workflow was enqueued on. Default: {DEFAULT_ALIAS}.",
        )


def _no_action(ctx: Context, options: dict[str, Any]) -> None:  # pragma: no cover - argparse requires one
    raise usage_error("Give an action: list, show or cancel.")


@contextmanager
def _workflow_errors() -> Iterator[None]:
    """The workflows' own errors as exit code 2 (bad input), with their messages."""
    from django_fdbqueue.tasks.exceptions import InvalidWorkflow, WorkflowDoesNotExist

    try:
        yield
    except (WorkflowDoesNotExist, InvalidWorkflow) as error:
        message = error.args[0] if error.args else str(error)
        raise usage_error(str(message)) from error


def handle_list(ctx: Context, options: dict[str, Any]) -> None:
    """One page of a backend's workflows in one status; an empty page is exit 0."""
    from django_fdbqueue.tasks.workflows import as_data, list_workflows

    ctx.database()  # a store that cannot be opened is exit 3, before anything else
    with _workflow_errors():
        page = list_workflows(
            options["status"], backend=options["backend"], after=options["cursor"], limit=options["limit"]
        )
    rows = [
        (w.id, w.name or "-", w.status, w.size, w.succeeded, w.failed, w.cancelled, as_data(w)["created_at"])
        for w in page.items
    ]
    headers = ("ID", "NAME", "STATUS", "NODES", "OK", "FAILED", "CANCELLED", "CREATED AT")
    text = table(headers, rows, right={3, 4, 5, 6}) if rows else f"No {options['status']} workflows."
    data = {"workflows": [as_data(w) for w in page.items], "next_cursor": page.next}
    if options["ids"] and not ctx.as_json:
        text = "\n".join(w.id for w in page.items)
    emit(ctx, data, lambda: text if options["ids"] else page_text(text, page.next))


def _node_cursor(cursor: str | None) -> int | None:
    if cursor is None:
        return None
    if not cursor.isdigit():
        raise usage_error(f"--cursor must be the cursor printed with the previous page; got {cursor!r}.")
    return int(cursor)


def handle_show(ctx: Context, options: dict[str, Any]) -> None:
    """The workflow's header, then a page of its nodes in index order."""
    from django_fdbqueue.tasks.workflows import as_data, get_workflow, node_data

    ctx.database()
    after = _node_cursor(options["cursor"])
    with _workflow_errors():
        workflow = get_workflow(options["workflow_id"], backend=options["backend"])
        nodes = workflow.nodes(after=after, limit=options["limit"])
    last = nodes[-1].index if nodes else None
    next_cursor = (
        str(last) if last is not None and last + 1 < workflow.size and len(nodes) == options["limit"] else None
    )
    data = {**as_data(workflow), "nodes": [node_data(n) for n in nodes], "next_cursor": next_cursor}

    def text() -> str:
        shown = as_data(workflow)
        shown["reason"] = compact_json(shown["reason"]) if shown["reason"] else None
        labels = {"size": "NODES", "on_failure": "ON FAILURE", "created_at": "CREATED AT", "finished_at": "FINISHED AT"}
        header = fields((labels.get(key, key.upper()), value) for key, value in shown.items())
        rows = [(n.index, n.task_path or "(forgotten)", n.state, n.attempts, n.predecessor_count) for n in nodes]
        nodes_table = table(("NODE", "TASK", "STATE", "ATTEMPTS", "WAITS ON"), rows, right={0, 3, 4})
        return header + "\n\n" + page_text(nodes_table if rows else "No nodes.", next_cursor)

    emit(ctx, data, text)


def handle_cancel(ctx: Context, options: dict[str, Any]) -> None:
    """Cancel after confirmation (y/N), or at once with --yes; a finished workflow is left as it is."""
    from django_fdbqueue.tasks.workflows import as_data, cancel_workflow, get_workflow

    workflow_id, backend = options["workflow_id"], options["backend"]
    action = f"cancel workflow {workflow_id!r}"
    ctx.database()
    if not options["yes"]:
        confirm.ensure_can_ask(ctx, action)
    with _workflow_errors():
        found = get_workflow(workflow_id, backend=backend)  # an unknown id fails before the question
        if not options["yes"] and not found.is_finished:
            confirm.ask(ctx, f"Cancel workflow {workflow_id} ({found.status}, {found.size} nodes)?", action)
        workflow = cancel_workflow(workflow_id, backend=backend)
    if found.is_finished:
        text = f"Workflow {workflow.id} had already finished ({found.status}); nothing was changed."
    else:
        text = f"Workflow {workflow.id} is cancelled: {workflow.cancelled} members will not run."
    emit(ctx, as_data(workflow), text, success=True)
