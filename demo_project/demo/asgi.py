"""ASGI entry point of the demo project: the waiting routes (pop and claim with ``wait``) hold no
thread while they wait. Served by gunicorn with uvicorn's worker (see the production guide):

    gunicorn demo.asgi:application -k uvicorn_worker.UvicornWorker
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demo.settings")

from django_fdbqueue.asgi import get_asgi_application  # noqa: E402 - after the settings module is named

application = get_asgi_application()
