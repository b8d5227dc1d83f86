"""REST API over the queue service: include ``django_fdbqueue.api.urls`` in a project's URLconf."""
