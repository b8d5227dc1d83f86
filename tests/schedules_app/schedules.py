"""Declared where the scheduler finds it, and imported by nothing else: the app's ``schedules`` module."""

from django_fdbqueue.schedules import declare

from . import DECLARED

for name, options in DECLARED.items():
    declare(name, **options)
