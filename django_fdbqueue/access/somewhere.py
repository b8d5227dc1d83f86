"""Whether a user may do an action on at least one queue: what the admin asks before it shows a
page or a form that is not about one queue yet (the queue list, "Create a queue", "Add schedule").

Kept apart from ``rules`` (which answers for one queue, or every queue) because only the admin
needs it: a form is shown to those who could use it for some name, and the POST is still checked
against the name it carries.
"""

from __future__ import annotations

from typing import Any

from django_fdbqueue.rights import check_action

from .rules import rights_of

__all__ = ["can_somewhere"]


def can_somewhere(user: Any, action: str) -> bool:
    """Whether ``user`` holds ``action`` on some queue: by a permission, or by any grant of it."""
    action = check_action(action)
    rights = rights_of(user)
    if rights is None:
        return False
    return action in rights.everywhere or any(action in actions for actions, _pattern in rights.rules)
