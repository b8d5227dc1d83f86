"""The admin's API token pages: list tokens, create one for a user (shown once), revoke them.

They sit under the queues (``__init__`` adds ``tokens/`` when knox is in INSTALLED_APPS), behind
the admin's login and staff check, with knox's own model permissions. They replace knox's own
admin (``knox``) because that one lists every token's digest and shows a new token in a message,
kept in a cookie until the next page: here a new token is written into the answer to the POST
that created it and nowhere else, and creating and revoking are audited (``access.audit``).

The pages, their permissions and scopes: the admin guide, "Manage API tokens"
(docs/howto/admin.md).
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.admin import ModelAdmin
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.utils.http import urlencode

from django_fdbqueue.access import audit
from django_fdbqueue.rights import canonical_rules
from django_fdbqueue.tokens import service as tokens

logger = logging.getLogger(__name__)

TEMPLATE_DIR = "admin/django_fdbqueue"
#: The list shows at most this many tokens (newest first); filter by user to see older ones.
TOKENS_SHOWN = 200

# Lifetimes offered by the create form; "default" is the project's REST_KNOX["TOKEN_TTL"].
LIFETIMES: tuple[tuple[str, dt.timedelta | None], ...] = (
    ("1", dt.timedelta(days=1)),
    ("7", dt.timedelta(days=7)),
    ("30", dt.timedelta(days=30)),
    ("90", dt.timedelta(days=90)),
    ("365", dt.timedelta(days=365)),
    ("never", None),
)


class TokenCreateForm(forms.Form):
    """Whose token, how long it lives, and what it may do (its scope)."""

    username = forms.CharField(
        label="User", max_length=254, help_text="The username the token acts as: it has that user's rights in the API."
    )
    lifetime = forms.ChoiceField(label="Expires", initial="default")
    scope = forms.CharField(
        required=False,
        max_length=10_000,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 40}),
        help_text="Optional: one rule per line, action[,action]:pattern, e.g. push:orders.* or consume,view:jobs "
        "(actions: view, push, consume, manage, delete). The token may then do only that, and never "
        "more than its user. Blank: all of the user's rights.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        default = tokens.duration_text(tokens.default_expiry())
        choices = [("default", f"Project default ({default})")]
        choices += [
            (key, "Never" if span is None else f"After {tokens.duration_text(span)}") for key, span in LIFETIMES
        ]
        lifetime = self.fields["lifetime"]
        assert isinstance(lifetime, forms.ChoiceField)  # declared above
        lifetime.choices = choices

    def clean_username(self) -> Any:
        try:
            return tokens.get_user(self.cleaned_data["username"].strip())
        except tokens.UnknownUser as error:
            raise forms.ValidationError(str(error)) from None

    def clean_scope(self) -> list[str] | None:
        """The rules, checked and canonical; None (no scope) when blank."""
        lines = [line.strip() for line in self.cleaned_data["scope"].splitlines() if line.strip()]
        if not lines:
            return None
        try:
            return canonical_rules(lines)
        except ValueError as error:
            raise forms.ValidationError(str(error)) from None

    def expiry(self) -> Any:
        """The chosen lifetime as ``create_token`` takes it."""
        key = self.cleaned_data["lifetime"]
        return tokens.DEFAULT_EXPIRY if key == "default" else dict(LIFETIMES)[key]


#: The create form's field a refusal of ``create_token`` is about (else the username).
_FIELD_OF: dict[type, str] = {tokens.InvalidExpiry: "lifetime", tokens.InvalidScope: "scope"}


class TokenFilterForm(forms.Form):
    user = forms.CharField(required=False, max_length=254)


class ConfirmForm(forms.Form):
    confirm = forms.BooleanField(initial=True, widget=forms.HiddenInput)


class TokenAdminViews:
    """The views, bound to the queues' ``ModelAdmin``, whose admin site and section they share."""

    def __init__(self, model_admin: ModelAdmin[Any]) -> None:
        self.model_admin = model_admin
        self.opts = model_admin.model._meta

    # -- helpers ---------------------------------------------------------------------------

    def allowed(self, request: HttpRequest, action: str) -> bool:
        """Whether the user holds knox's model permission for ``action`` (view also by change)."""
        meta = tokens.token_model()._meta
        codenames = (action, "change") if action == "view" else (action,)
        return any(request.user.has_perm(f"{meta.app_label}.{codename}_{meta.model_name}") for codename in codenames)

    def require(self, request: HttpRequest, action: str) -> None:
        """404 without knox (these pages do not exist then), 403 without the permission."""
        if not tokens.knox_installed():
            raise Http404("API tokens are not enabled: knox is not in INSTALLED_APPS.")
        if not self.allowed(request, action):
            raise PermissionDenied

    def url(self, page: str, *args: Any, **query: str) -> str:
        address = reverse(
            f"admin:{self.opts.app_label}_{self.opts.model_name}_{page}",
            args=args,
            current_app=self.model_admin.admin_site.name,
        )
        query = {key: value for key, value in query.items() if value}
        return f"{address}?{urlencode(query)}" if query else address

    def context(self, request: HttpRequest, title: str, **extra: Any) -> dict[str, Any]:
        return {
            **self.model_admin.admin_site.each_context(request),
            "opts": self.opts,
            "title": title,
            "changelist_url": self.url("changelist"),
            "has_queue_view_permission": self.model_admin.has_view_permission(request),
            "tokens_url": self.url("tokens"),
            "can_add_token": self.allowed(request, "add"),
            "can_revoke_token": self.allowed(request, "delete"),
            "min_prefix_length": tokens.MIN_PREFIX_LENGTH,
            **extra,
        }

    def render(self, request: HttpRequest, template: str, context: dict[str, Any], status: int = 200) -> HttpResponse:
        request.current_app = self.model_admin.admin_site.name
        return TemplateResponse(request, f"{TEMPLATE_DIR}/{template}", context, status=status)

    def failed(self, request: HttpRequest, error: tokens.TokenError) -> HttpResponse:
        """A refusal no form could show, as a page, never a 500.

        A database failure is a 503 whose page gives no detail (a database's message may name
        hosts and users); the log has it.
        """
        if isinstance(error, tokens.TokenStoreError):
            logger.error("API token admin: the token store failed on %s %s: %s", request.method, request.path, error)
            context = self.context(
                request,
                "The token store is unavailable",
                error_message=(
                    "The database holding the API tokens did not answer (the server's log says why). If "
                    "“knox” was just added to INSTALLED_APPS, run manage.py migrate."
                ),
            )
            return self.render(request, "token_error.html", context, status=503)
        logger.warning("API token admin: %r on %s %s", error, request.method, request.path)
        context = self.context(request, "That cannot be done", error_message=str(error))
        return self.render(request, "token_error.html", context, status=400)

    # -- pages -------------------------------------------------------------------------------

    def token_list(
        self, request: HttpRequest, *, create_form: TokenCreateForm | None = None, status: int = 200
    ) -> HttpResponse:
        """Tokens, newest first (optionally one user's), with the create form below."""
        self.require(request, "view")
        filters = TokenFilterForm(request.GET)
        username = filters.cleaned_data["user"].strip() if filters.is_valid() else ""
        user, unknown_user = None, False
        try:
            if username:
                try:
                    user = tokens.get_user(username)
                except tokens.UnknownUser:
                    unknown_user = True
            records = [] if unknown_user else tokens.list_tokens(user, limit=TOKENS_SHOWN)
            if create_form is None and self.allowed(request, "add"):
                create_form = TokenCreateForm(initial={"username": username})
        except tokens.TokenError as error:
            return self.failed(request, error)
        now = dt.datetime.now(dt.timezone.utc)
        rows = [{"record": record, "expired": record.is_expired(now)} for record in records]
        context = self.context(
            request,
            "API tokens",
            rows=rows,
            filter_username=username,
            unknown_user=unknown_user,
            filtered_user=user,
            shown_limit=TOKENS_SHOWN if len(records) >= TOKENS_SHOWN else None,
            create_form=create_form,
            create_url=self.url("token_create"),
            revoke_all_url=self.url("token_revoke_all", user.pk) if user is not None and records else None,
        )
        return self.render(request, "token_list.html", context, status=status)

    def token_create(self, request: HttpRequest) -> HttpResponse:
        """Create a token (POST); the answer is the one page that ever shows it."""
        self.require(request, "add")
        if request.method != "POST":
            return HttpResponseRedirect(self.url("tokens"))
        form = TokenCreateForm(request.POST)
        try:
            if not form.is_valid():
                return self.token_list(request, create_form=form, status=400)
            record, token = tokens.create_token(
                form.cleaned_data["username"],
                expiry=form.expiry(),
                created_by=request.user,
                scope=form.cleaned_data["scope"],
            )
        except tokens.TokenStoreError as error:
            return self.failed(request, error)
        except tokens.TokenError as error:  # inactive user, a superuser's token, the per-user limit
            form.add_error(_FIELD_OF.get(type(error), "username"), str(error))
            return self.token_list(request, create_form=form, status=400)
        logger.info("API token %s created for %r by %r", record.prefix, record.username, request.user.get_username())
        audit.record(
            request,
            "manage",
            record.prefix,
            {"operation": "create", "token": record.prefix, "user": record.username, "scope": record.scope},
        )
        context = self.context(request, "API token created", record=record, token=token)
        response = self.render(request, "token_created.html", context)
        add_never_cache_headers(response)  # the admin adds them too; this page must never be cached
        return response

    def token_revoke(self, request: HttpRequest, prefix: str) -> HttpResponse:
        """Revoke one token: a confirmation page, then the POST that deletes it."""
        self.require(request, "delete")
        try:
            found = tokens.find_token(prefix)
        except (tokens.TokenNotFound, tokens.InvalidPrefix):
            messages.warning(request, "That token no longer exists: it was revoked, or it expired and knox removed it.")
            return HttpResponseRedirect(self.url("tokens"))
        except tokens.TokenError as error:
            return self.failed(request, error)
        form = ConfirmForm(request.POST if request.method == "POST" else None)
        if form.is_valid():
            try:
                record = tokens.revoke_token(found.prefix)
            except tokens.TokenNotFound:
                messages.warning(request, "That token was revoked by someone else in the meantime.")
            except tokens.TokenError as error:
                return self.failed(request, error)
            else:
                logger.info(
                    "API token %s of %r revoked by %r", record.prefix, record.username, request.user.get_username()
                )
                audit.record(
                    request,
                    "manage",
                    record.prefix,
                    {"operation": "destroy", "token": record.prefix, "user": record.username},
                )
                messages.success(request, f"The token {record.prefix}… of “{record.username}” was revoked.")
            return HttpResponseRedirect(self.url("tokens"))
        context = self.context(request, "Revoke API token", action="revoke", record=found, form=ConfirmForm())
        return self.render(request, "token_confirm.html", context)

    def token_revoke_all(self, request: HttpRequest, user_id: str) -> HttpResponse:
        """Revoke every token of one user (someone leaving, a machine retired), after confirming."""
        self.require(request, "delete")
        model = get_user_model()
        try:
            user = model._default_manager.get(pk=user_id)
        except (model.DoesNotExist, ValueError, ValidationError):  # also a malformed primary key
            raise Http404("No such user.") from None
        form = ConfirmForm(request.POST if request.method == "POST" else None)
        try:
            if form.is_valid():
                revoked = tokens.revoke_all(user)
                for record in revoked:
                    audit.record(
                        request,
                        "manage",
                        record.prefix,
                        {"operation": "destroy", "token": record.prefix, "user": record.username},
                    )
                logger.info(
                    "%d API tokens of %r revoked by %r", len(revoked), user.get_username(), request.user.get_username()
                )
                count = len(revoked)
                messages.success(
                    request, f"{count} token{'' if count == 1 else 's'} of “{user.get_username()}” revoked."
                )
                return HttpResponseRedirect(self.url("tokens", user=user.get_username()))
            records = tokens.list_tokens(user)
        except tokens.TokenError as error:
            return self.failed(request, error)
        context = self.context(
            request, "Revoke API tokens", action="revoke_all", target=user, records=records, form=ConfirmForm()
        )
        return self.render(request, "token_confirm.html", context)
