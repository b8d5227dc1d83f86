"""The URLconf of the docs build: the REST API mounted where the installation steps put it."""

from django.urls import include, path

urlpatterns = [
    path("api/", include("django_fdbqueue.api.urls")),
]
