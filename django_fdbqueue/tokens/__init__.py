"""API tokens for the REST API, kept by django-rest-knox: create, list and revoke them per user.

Clients of the API need a credential that is cheap to check on every request and safe to store
on the server, which a password is not: knox keeps only a digest of each token and its prefix.
This package is optional, like knox itself (the app's ``tokens`` extra): ``service`` is the only
module that touches knox, and only inside its functions, so importing this package never needs
it. Its faces are ``django_fdbqueue.admin.tokens``, ``django_fdbqueue.admin.knox`` and
``django_fdbqueue.cli.tokens``.

How to set tokens up and use them: the tokens guide (docs/howto/tokens.md); why tokens rather
than passwords: docs/explanation/security.md.
"""
