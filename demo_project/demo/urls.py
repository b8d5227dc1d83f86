"""Demo URLs: the admin (with the queue pages), the REST API under /api/ and its OpenAPI schema,
and Prometheus metrics under /metrics/ (guarded like the API).

The one demo-only page, which enqueues example tasks, sits under /admin/ behind the admin's login.
"""

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from . import views

urlpatterns = [
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
    # Before the admin's own URLs, whose catch-all would otherwise answer this address.
    path("admin/demo/enqueue-example/", admin.site.admin_view(views.enqueue_example), name="demo-enqueue-example"),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/", include("django_fdbqueue.api.urls")),
    # Prometheus metrics, behind the API's authentication and permissions.
    path("metrics/", include("django_fdbqueue.metrics.urls")),
]
