"""The metrics URL; a project mounts it with ``path("metrics/", include("django_fdbqueue.metrics.urls"))``.

Loading this URLconf imports the view, which starts counting this process's queue operations
(see the package docstring). It loads without ``prometheus-client``; the endpoint then answers
501 saying what to install.
"""

from django.urls import path

from .views import MetricsView

app_name = "fdbqueue-metrics"

urlpatterns = [
    path("", MetricsView.as_view(), name="metrics"),
]
