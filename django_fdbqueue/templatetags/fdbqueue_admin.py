"""Template filters of the admin queue pages: item values as indented JSON, short ages and times.

They return plain strings, so the template's autoescaping still applies to whatever a queue item
contains: a value such as ``"<script>…"`` is shown as text, never as markup. The one exception,
``breakable``, escapes its text itself before it adds line-break hints.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from typing import Any

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

register = template.Library()


def _fallback(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"bytes (base64)": base64.b64encode(bytes(value)).decode("ascii")}
    return repr(value)


@register.filter
def as_json(value: Any, indent: int = 2) -> str:
    """The value as indented JSON text (bytes shown as base64, anything else by its repr)."""
    return json.dumps(value, indent=indent or None, ensure_ascii=False, default=_fallback)


@register.filter
def compact_json(value: Any, limit: int = 200) -> str:
    """The value as one line of JSON, cut to ``limit`` characters (for messages and titles)."""
    text = json.dumps(value, ensure_ascii=False, default=_fallback)
    limit = int(limit)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@register.filter
def age(seconds: float | None) -> str:
    """A duration in seconds as a short human text: "42 s", "3 min 5 s", "2 h 4 min", "3 d 1 h"."""
    if seconds is None:
        return "—"
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


@register.filter
def breakable(name: Any) -> SafeString:
    """The text, escaped, with a line-break hint after each "." and "_": a long dotted queue name
    then wraps between its parts in a narrow column, not in the middle of a word."""
    escaped = str(escape(name))
    return mark_safe(escaped.replace(".", ".<wbr>").replace("_", "_<wbr>"))


@register.filter
def from_now(moment: dt.datetime | None) -> str:
    """How far a moment is from now, in words: "in 25 s" or "3 min ago" (for lease ends, delays)."""
    if moment is None:
        return "—"
    seconds = (moment - dt.datetime.now(dt.timezone.utc)).total_seconds()
    if seconds >= 0:
        return f"in {age(seconds)}"
    return f"{age(-seconds)} ago"


@register.filter
def is_past(moment: dt.datetime | None) -> bool:
    """Whether the moment has passed (an expired lease, an elapsed delay not yet noticed)."""
    return moment is not None and moment <= dt.datetime.now(dt.timezone.utc)
