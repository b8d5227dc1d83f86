"""URLs of the queue API; a project mounts them with ``path("api/", include("django_fdbqueue.api.urls"))``.

Routes (relative to the mount point): queues/, queues/{name}/, the item actions
queues/{name}/push/, pop/, peek/, items/, clear/, the lease actions claim/, ack/, release/,
extend/, the listings scheduled/ and dead-letters/, and one dead letter's
dead-letters/{item_id}/ (DELETE) and dead-letters/{item_id}/requeue/; plus DRF's browsable API
root. All are actions of the one viewset, so the router builds every pattern.
"""

from rest_framework.routers import DefaultRouter

from .views import QueueViewSet

app_name = "fdbqueue-api"


class QueueRouter(DefaultRouter):
    # Queue names may contain dots, so "queues/a.json/" must name the queue "a.json", not ask for
    # JSON: no format-suffix routes (?format=json still works).
    include_format_suffixes = False


router = QueueRouter()
router.register("queues", QueueViewSet, basename="queue")

urlpatterns = router.urls
