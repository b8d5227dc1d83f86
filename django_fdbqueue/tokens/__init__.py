"""API tokens for the REST API, kept by django-rest-knox: create, list and revoke them per user.

Clients of the API need a credential that is cheap to check on every request and safe to store
on the server. HTTP basic authentication is neither: each request runs the password hasher (a
few hundred milliseconds of CPU by design), and the password it carries opens the admin too.
knox's tokens are long random strings of which the server keeps only a SHA-512 digest (plus the
first 15 characters, ``token_key``, to find the row and to name the token to people), so checking
one is a lookup and a hash, and a leaked database does not leak usable tokens.

This package is optional, like knox itself (the app's ``tokens`` extra installs knox, then
``"knox"`` in ``INSTALLED_APPS`` and ``manage.py migrate``):

- ``service``: create, list and revoke tokens; the only module that touches knox, and only
  inside its functions, so importing this package never needs knox;
- ``django_fdbqueue.admin.tokens``: the admin pages under the queues (added when knox is
  installed);
- ``django_fdbqueue.admin.knox``: knox's own admin entry, replaced by one that leads to them;
- ``django_fdbqueue.cli.tokens``: ``manage.py fdbqueue token create|list|revoke``.

Without knox, the admin pages are absent and the commands stop with a message saying what to
install; nothing else in the app changes.
"""
