"""Asking before destroying data, and refusing to guess when no one can answer.

A script that forgets ``--yes`` must fail at once rather than hang on a prompt or read its next
input line as the answer, so a prompt is only shown when standard input is a terminal. Prompts go
to standard error, which keeps standard output clean for ``--json``.
"""

from __future__ import annotations

from typing import Any

from .base import Context
from .errors import usage_error

__all__ = ["is_terminal", "ensure_can_ask", "ask"]


def is_terminal(stream: Any) -> bool:
    """True when ``stream`` is an interactive terminal a person can type an answer into."""
    isatty = getattr(stream, "isatty", None)
    if not callable(isatty):
        return False
    try:
        return bool(isatty())
    except ValueError:  # a closed stream
        return False


def ensure_can_ask(ctx: Context, action: str) -> None:
    """Refuse (exit 2) when no one could answer a prompt; call it before any other work."""
    if not is_terminal(ctx.stdin):
        raise usage_error(
            f"Refusing to {action} without confirmation: standard input is not a terminal. Pass --yes to confirm."
        )


def ask(ctx: Context, prompt: str, action: str, *, expect: str | None = None) -> None:
    """Show ``prompt``; return when the answer agrees, raise a usage error (exit 2) otherwise.

    With ``expect``, the person must type exactly that text (a queue name, say), which a reflex
    "y" cannot do, and ``prompt`` should say so; without it, ``[y/N]`` is added, and "y" or "yes"
    agrees while anything else, Enter included, declines.
    """
    ensure_can_ask(ctx, action)
    shown = prompt if expect is not None else f"{prompt} [y/N]"
    ctx.stderr.write(f"{shown} ", style_func=lambda text: text, ending="")
    ctx.stderr.flush()
    try:
        answer = ctx.stdin.readline()
    except KeyboardInterrupt:
        answer = ""
    if not answer.endswith("\n"):
        ctx.stderr.write("", style_func=lambda text: text)  # end the prompt's line
    answer = answer.strip()
    agreed = answer == expect if expect is not None else answer.lower() in ("y", "yes")
    if not agreed:
        raise usage_error(f"Not confirmed: did not {action}.")
