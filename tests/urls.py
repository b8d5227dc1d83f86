from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/", include("django_fdbqueue.api.urls")),
    path("metrics/", include("django_fdbqueue.metrics.urls")),
]
