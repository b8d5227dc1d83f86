"""URLs of the queue API; a project mounts them with ``path("api/", include("django_fdbqueue.api.urls"))``.

Routes (relative to the mount point): queues/, queues/{name}/, the item actions
queues/{name}/push/, pop/, peek/, items/, clear/, the lease actions claim/, ack/, release/,
extend/, the listings scheduled/ and dead-letters/, and one dead letter's
dead-letters/{item_id}/ (DELETE) and dead-letters/{item_id}/requeue/; schedules/ and schedules/{name}/ with pause/,
resume/ and run-now/ (``api.schedules``); workflows/, workflows/{id}/ and workflows/{id}/cancel/
(``api.workflows``); plus DRF's browsable API
root. All are actions of the two viewsets, so the router builds every pattern.
"""

from typing import Any, Callable

from rest_framework.permissions import BasePermission
from rest_framework.response import Response
from rest_framework.routers import APIRootView, DefaultRouter

from . import permissions
from .exceptions import exception_handler
from .schedules import ScheduleViewSet
from .views import QueueViewSet
from .workflows import WorkflowViewSet

app_name = "fdbqueue-api"


class QueueAPIRootView(APIRootView):
    """The API's root page (a list of links), guarded like every other route of the API."""

    # DRF's root view would follow the project's DEFAULT_PERMISSION_CLASSES (AllowAny unless set),
    # not FDBQUEUE["PERMISSION_CLASSES"]. The browsable API shows ``name`` and ``description`` at
    # the top of the page (without them: the class's name and docstring), so they speak to the
    # API's users.
    name = "FDB queues API"
    description = (
        "The REST API of the project's queues, stored in FoundationDB: FIFO and double-ended "
        "priority queues (push, pop, claim and ack, dead letters) and their periodic schedules. "
        "Follow a link below to list them; each route's page says what it takes."
    )

    def get_permissions(self) -> list[BasePermission]:
        return permissions.get_permissions()

    def get_exception_handler(self) -> Callable[[Exception, dict[str, Any]], Response | None]:
        return exception_handler


class QueueRouter(DefaultRouter):
    APIRootView = QueueAPIRootView

    # Queue names may contain dots, so "queues/a.json/" must name the queue "a.json", not ask for
    # JSON: no format-suffix routes (?format=json still works).
    include_format_suffixes = False


router = QueueRouter()
router.register("queues", QueueViewSet, basename="queue")
router.register("schedules", ScheduleViewSet, basename="schedule")
router.register("workflows", WorkflowViewSet, basename="workflow")

urlpatterns = router.urls
