"""Async blocking pops and claims: ``waiting.blocking`` for coroutines, holding no thread while parked.

Each attempt (the pop or claim transaction) runs on the pool (``offload``), and one whose caller
is cancelled meanwhile has what it took given back (``giveback``). Between attempts the caller
parks in its queue's channel (``watchhub``), which shares one watch among all the waiters of the
queue and wakes each by the rule the sync wait follows (``waiting.next_turn``): a claim whose
candidates are all at their key's limit parks too, until its chance comes. Same bounds and
errors as the sync wait: ``wait`` from 0 to ``MAX_WAIT_SECONDS``, checked before the first
attempt; ``QueueNotFound`` once the queue is deleted; an attempt that timed out is tried again
while the wait lasts (``waiting.try_again_after``).
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any, Callable, TypeVar

from . import checks, offload, watchhub
from .waiting import MAX_WAIT_SECONDS, TIMED_OUT_PAUSE, Blocked, try_again_after
from ..records import now_micros

T = TypeVar("T")


async def blocking(
    db: Any, name: str, wait: object, attempt: Callable[[bytes], Any], undo: Callable[[Any], None]
) -> Any:
    """Run ``attempt(hint)`` on the pool until it returns something or ``wait`` seconds pass.

    ``hint`` is b"", or after a wake-up the key of a ready item no other woken waiter was handed
    (``watchhub.Channel.park``): a claim may take that one, so that waiters woken together do
    not all collide on the first item.
    ``wait`` None runs it once. What an attempt returns after its caller was cancelled goes to
    ``undo``. A ``Blocked`` result means "items, none claimable now": not returned.
    """
    if wait is None:
        got = await offload.run_undoable(partial(attempt, b""), undo)
        return None if isinstance(got, Blocked) else got
    seconds = checks.check_seconds(wait, "wait", minimum=0, maximum=MAX_WAIT_SECONDS)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    woken_in: watchhub.Channel | None = None
    hint = b""
    while True:
        seen_at = loop.time()
        try:
            got = await offload.run_undoable(partial(attempt, hint), undo)
        except BaseException as error:
            if woken_in is not None:
                woken_in.attempted(None, hint=hint)  # its turn goes to the next waiter
                woken_in, hint = None, b""
            if not try_again_after(error, deadline - loop.time()):
                raise
            await asyncio.sleep(TIMED_OUT_PAUSE)
            continue
        blocked = got if isinstance(got, Blocked) else None
        if woken_in is not None:
            woken_in.attempted(got is not None and blocked is None, _comes_back_in(got), hint)
            woken_in, hint = None, b""
        if got is not None and blocked is None:
            return got
        chan = watchhub.channel(db, name)
        turn = await chan.park(deadline, seen_at, blocked)
        if turn is None:
            return None
        hint, woken_in = turn, chan


def _comes_back_in(got: Any) -> float | None:
    """Seconds until a lease the attempt took ends (its item comes back unless acked), or None."""
    ends = getattr(got, "lease_expires_at", None)
    return None if ends is None else max(0.0, ends.timestamp() - now_micros() / 1_000_000)
