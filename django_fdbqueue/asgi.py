"""The ASGI application to serve a project with: Django's, with a thread count that waiters do not grow.

Django's own handler keeps a thread per request in progress for its synchronous parts, so 1,000
long polls parked on the event loop would still keep 1,000 idle threads. Here each request's
synchronous parts run on one of a fixed set of single-thread lanes (:data:`LANES` per process).
On Django 4.2 it also cancels the view when the client disconnects, as Django 5 does; and each
request's :class:`Handover` gives back what a waiting pop or claim took unless the answer's last
body message was sent.

How to serve with it, and what a disconnect costs: the production guide, "Serve many long polls:
ASGI" (docs/howto/production.md); how it meets the async views: the code map
(docs/explanation/code-map.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Awaitable, Callable, Mapping

import django
from asgiref.sync import SyncToAsync, ThreadSensitiveContext, sync_to_async
from django.core import signals
from django.core.handlers.asgi import ASGIHandler

__all__ = ["HANDOVER", "LANES", "FdbQueueASGIHandler", "Handover", "get_asgi_application"]

#: Threads per process that run the requests' synchronous parts: as many requests' sync code runs
#: at once (the rest queue for their lane), however many requests are in progress or parked.
LANES = 8
#: Django 5.0 and later cancel the view on a disconnect themselves.
_CANCELS_ON_DISCONNECT = django.VERSION >= (5, 0)

Receive = Callable[[], Awaitable[Mapping[str, Any]]]
Send = Callable[[Mapping[str, Any]], Awaitable[None]]
#: The scope key of a request's :class:`Handover`.
HANDOVER = "django_fdbqueue.handover"


class Handover:
    """What a request's view took for its client, given back unless the answer is sent.

    The view calls :meth:`hold` with the give-back of what it took (``Returnable.give_back``:
    it returns at once); the handler calls :meth:`sent` once the last body message of the answer
    went to the server, then :meth:`end` as the request ends, which gives back what is still
    held: the client disconnected, or an error cut the answer, before it was sent.
    """

    def __init__(self) -> None:
        self._give_back: Callable[[], None] | None = None

    def hold(self, give_back: Callable[[], None]) -> None:
        self._give_back = give_back

    def sent(self) -> None:
        self._give_back = None

    def end(self) -> None:
        give_back, self._give_back = self._give_back, None
        if give_back is not None:
            give_back()


class Lanes:
    """A fixed set of single-thread executors, handed out in turn; made on first use (after a fork)."""

    def __init__(self, count: int) -> None:
        if count < 1:
            raise ValueError(f"lanes: at least 1, not {count!r}")
        self.count = count
        self._executors: list[ThreadPoolExecutor] = []
        self._turn = itertools.count()
        self._lock = threading.Lock()

    def next(self) -> ThreadPoolExecutor:
        with self._lock:
            if not self._executors:
                self._executors = [
                    ThreadPoolExecutor(1, thread_name_prefix=f"fdbqueue-asgi-lane-{index}")
                    for index in range(self.count)
                ]
            return self._executors[next(self._turn) % self.count]


class FdbQueueASGIHandler(ASGIHandler):
    """Django's ASGI handler on a bounded set of lanes, cancelling the view on a disconnect."""

    def __init__(self, lanes: int = LANES) -> None:
        super().__init__()
        self.lanes = Lanes(lanes)

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        handover = Handover()

        async def send_noting(message: Mapping[str, Any]) -> None:
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                handover.sent()

        async with ThreadSensitiveContext() as context:
            ours = SyncToAsync.thread_sensitive_context.get(None) is context  # not inside another's
            if ours:
                SyncToAsync.context_to_thread_executor[context] = self.lanes.next()
            try:
                await self.handle({**scope, HANDOVER: handover}, receive, send_noting)
            finally:
                handover.end()
                if ours:  # the lane is shared: the context's exit must not shut it down
                    SyncToAsync.context_to_thread_executor.pop(context, None)

    async def handle(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if _CANCELS_ON_DISCONNECT:
            await super().handle(scope, receive, send)
        else:
            await self._handle_cancelling(scope, receive, send)

    async def _handle_cancelling(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        """Django 4.2's handle, with its task cancelled when the client disconnects after its body."""
        body_read = asyncio.Event()

        async def receive_body() -> Mapping[str, Any]:
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_read.set()
            return message

        responding = asyncio.Event()

        async def send_noting(message: Mapping[str, Any]) -> None:
            responding.set()
            await send(message)

        serving = asyncio.ensure_future(super().handle(scope, receive_body, send_noting))
        watching = asyncio.ensure_future(_disconnected(body_read, receive))
        await asyncio.wait({serving, watching}, return_when=asyncio.FIRST_COMPLETED)
        if serving.done() or responding.is_set():  # an answer under way is finished, not cut
            watching.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watching
            await serving
            return
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving
        # The response that would have closed the request never came: end it as Django 5 does.
        await sync_to_async(signals.request_finished.send, thread_sensitive=True)(sender=self.__class__)


async def _disconnected(body_read: asyncio.Event, receive: Receive) -> None:
    """Return once the client has gone, listening only after the handler has read the body."""
    await body_read.wait()
    while (await receive())["type"] != "http.disconnect":
        pass


def get_asgi_application(lanes: int = LANES) -> FdbQueueASGIHandler:
    """Set Django up and return the handler (``django.core.asgi.get_asgi_application``'s twin)."""
    django.setup(set_prefix=False)
    return FdbQueueASGIHandler(lanes)
