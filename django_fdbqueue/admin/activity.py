"""The admin's activity charts: a page with every queue's throughput and depth over the last hour
and day, the same charts for one queue on its page, and the JSON they are drawn from.

The page and the panels draw with Chart.js (vendored under ``static/django_fdbqueue/vendor/``)
from ``activity.js``, which fetches ``activity/data/`` every few seconds: the charts move without
the page being reloaded. The JSON view is behind the admin's login and staff check (the admin
site's ``admin_view``); it shows only the queues the user may view (``django_fdbqueue.access``),
and their total: one queue the user may not see is a 404, as on the queue pages. Each read also
samples the depth and age gauges (``service.activity.sample``), so the charts record them while
somebody looks.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse

from django_fdbqueue import access
from django_fdbqueue.connection import get_database
from django_fdbqueue.exceptions import InvalidArgument, QueueNotFound
from django_fdbqueue.service import activity

from .pages import AdminPages, store_guard

#: How often the charts fetch new data, in seconds.
REFRESH_SECONDS = 5


def chart_context(pages: AdminPages, name: str | None) -> dict[str, Any]:
    """What the charts include needs: where to fetch, how often, for which queue."""
    url = pages.url("activity_data", queue=name or "")
    return {"activity_data_url": url, "activity_refresh": REFRESH_SECONDS, "activity_queue": name or ""}


class ActivityAdminViews(AdminPages):
    """The activity page and its JSON."""

    @store_guard
    def activity_page(self, request: HttpRequest) -> HttpResponse:
        """All queues together, and a chart per queue below (first ones of the catalog)."""
        self.require(request, "view")
        data = self._visible(request, activity.series(get_database(), span="hour"))
        links = [(name, self.url("change", name)) for name in sorted(data["queues"])]
        context = self.context(
            request, "Activity", queue_links=links, activity_url=self.url("activity"), **chart_context(self, None)
        )
        return self.render(request, "activity.html", context)

    @store_guard
    def activity_data(self, request: HttpRequest) -> HttpResponse:
        """``?queue=<name>`` (or all queues) and ``?span=hour|day``: the series as JSON."""
        self.require(request, "view")
        name = request.GET.get("queue") or None
        span = request.GET.get("span", "hour")
        db = get_database()
        try:
            if name is not None:
                self.require_on(request, "view", name)
            activity.check_span(span)
            activity.sample(db, name)
            data = self._visible(request, activity.series(db, name, span=span))
        except Http404:
            return JsonResponse({"code": "queue_not_found", "detail": f"No queue is named {name!r}."}, status=404)
        except access.QueueAccessDenied as refusal:
            return JsonResponse({"code": refusal.code, "detail": str(refusal)}, status=403)
        except QueueNotFound as error:
            return JsonResponse({"code": error.code, "detail": str(error)}, status=404)
        except InvalidArgument as error:
            return JsonResponse({"code": error.code, "detail": str(error)}, status=400)
        return JsonResponse(data)  # never cached: the admin site's admin_view marks it so

    def _visible(self, request: HttpRequest, data: dict[str, Any]) -> dict[str, Any]:
        """``data`` with only the queues the user may view, and the total of those."""
        shown = access.visible_queues(request.user, data["queues"])
        if len(shown) == len(data["queues"]):
            return data
        queues = {name: data["queues"][name] for name in shown}
        # Summed as series() sums every queue (the age: their maximum), by its own helper.
        return {**data, "queues": queues, "total": activity.totals(queues, len(data["buckets"]))}
