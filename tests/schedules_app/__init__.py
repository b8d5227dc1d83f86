"""A Django app for the tests of schedule discovery: what its ``schedules`` module declares.

The tests install it (``INSTALLED_APPS``) and set :data:`DECLARED` before the scheduler's
discovery imports ``tests.schedules_app.schedules``; nothing else imports that module.
"""

#: name -> the keyword arguments of ``schedules.declare``.
DECLARED: dict[str, dict] = {}
