"""Who may do what to which queue: actions, grants on queue-name patterns, scoped tokens, audit.

The faces that act for a person (the REST API, the admin, the metrics endpoint) ask here before
they act; the Python service API stays the operator's and never does. A project's own views use
the same four functions::

    from django_fdbqueue import access

    access.require(request.user, "push", "orders.eu")  # QueueAccessDenied (a PermissionDenied) if not
    if access.can(request.user, "view", "orders.eu"): ...

See ``docs/howto/permissions.md``.
"""

from django_fdbqueue.rights import (
    ACTIONS,
    EVERY_QUEUE,
    Action,
    Pattern,
    PatternError,
    ScopeRule,
    canonical_rules,
    check_action,
    parse_actions,
    parse_pattern,
    parse_scope,
)

from .actions import ADMIN_ACTIONS, ADMIN_PAGES, PERMISSIONS, REST_ROUTES
from .exceptions import QueueAccessDenied
from .rules import can, can_every, may_see, require, require_every, visible_queues

__all__ = [
    "ACTIONS",
    "ADMIN_ACTIONS",
    "ADMIN_PAGES",
    "EVERY_QUEUE",
    "PERMISSIONS",
    "REST_ROUTES",
    "Action",
    "Pattern",
    "PatternError",
    "QueueAccessDenied",
    "ScopeRule",
    "can",
    "can_every",
    "canonical_rules",
    "check_action",
    "may_see",
    "parse_actions",
    "parse_pattern",
    "parse_scope",
    "require",
    "require_every",
    "visible_queues",
]
