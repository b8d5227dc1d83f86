"""knox's own admin for its ``AuthToken`` model, folded into the token pages: one place for tokens.

knox registers an admin of its own ("Knox › Auth tokens"), which lists every token's digest and
shows a new token in a message (kept in a cookie until the next page). Beside the token pages of
``tokens`` that made two places to manage the same tokens, with different rules. So when the
token pages are installed, the package replaces knox's admin with ``TokenPagesAdmin``: it leaves
the admin index and sidebar (the app's own "API tokens" entry, ``entries``, leads to the token
pages), and every address of knox's admin (its list, its add page, a token's page) redirects to
the token pages, so old links and bookmarks still arrive.

A project that wants knox's admin back registers it again, from the ``admin.py`` of an app listed
after ``"django_fdbqueue"``: ``admin.site.unregister(AuthToken)`` then
``admin.site.register(AuthToken, knox.admin.AuthTokenAdmin)``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any, Callable

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, path, re_path, reverse

from django_fdbqueue.tokens import service as tokens

#: The admin address name of the token list (see ``QueueAdmin._token_urls``).
TOKEN_LIST = "fdbqueue_queue_tokens"


# Django's ModelAdmin and ModelForm take a type argument for type checkers only, not at run time.
if TYPE_CHECKING:
    _TokenModelAdmin = admin.ModelAdmin[Any]  # knox is untyped
else:
    _TokenModelAdmin = admin.ModelAdmin


class TokenPagesAdmin(_TokenModelAdmin):
    """Stands in for knox's ``AuthTokenAdmin``: knox's addresses lead to the token pages; nothing
    here reads or writes a token."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        """Never listed on the index: the app's "API tokens" entry is the one place for tokens."""
        return False

    def get_urls(self) -> list[URLPattern]:
        info = f"{self.opts.app_label}_{self.opts.model_name}"
        to_list = self._redirect("")
        return [
            path("", to_list, name=f"{info}_changelist"),
            path("add/", self._redirect("#create-token"), name=f"{info}_add"),
            path("<path:object_id>/change/", to_list, name=f"{info}_change"),
            re_path(r"^.*$", to_list),
        ]

    def _redirect(self, anchor: str) -> Callable[..., HttpResponse]:
        """A view that sends the user to the token list (to its ``anchor``), keeping the query."""

        def view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            target = reverse(f"admin:{TOKEN_LIST}", current_app=self.admin_site.name)
            query = request.GET.urlencode()
            return HttpResponseRedirect(f"{target}?{query}{anchor}" if query else f"{target}{anchor}")

        return self.admin_site.admin_view(view)


def fold_knox_admin_in(site: admin.AdminSite) -> bool:
    """Put ``TokenPagesAdmin`` in place of knox's admin on ``site``; False when knox is not installed.

    knox's ``admin`` module is imported first, so its registration has happened whatever the
    order of INSTALLED_APPS (the admin's autodiscovery does not import a module twice).
    """
    if not tokens.knox_installed():
        return False
    model = tokens.token_model()
    if site is admin.site:
        import_module("knox.admin")
    if site.is_registered(model):
        site.unregister(model)
    site.register(model, TokenPagesAdmin)
    return True
