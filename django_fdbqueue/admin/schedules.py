"""The admin's schedules page: every periodic schedule with its next and last run and last result,
a form to add one, and per schedule: edit, pause or resume, run now, delete.

It sits under the queues (``admin/__init__`` adds ``schedules/`` to the ``Queue`` admin's
addresses), behind the admin's login and staff check. A schedule is its target queue's
(``django_fdbqueue.access``): view on it to see the schedule (the list shows only those), manage
on it to create, edit, pause, resume, run now or delete it; editing to a new target needs manage
on both. A task target may land in any task queue (its task decides), so it needs the action on
every queue. A schedule the user may not see at all is a 404; every change is audited.
The work is ``django_fdbqueue.schedules``'; the form's checks are the schedule model's own.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect

from django_fdbqueue import access, schedules
from django_fdbqueue.access import events
from django_fdbqueue.connection import get_database
from django_fdbqueue.exceptions import InvalidArgument, ScheduleAlreadyExists, ScheduleNotFound
from django_fdbqueue.schedules import model

from .pages import AdminPages, store_guard

KINDS = (("push", "Push an item to a queue"), ("task", "Enqueue a Django task"))


class ScheduleForm(forms.Form):
    """A schedule's definition, checked by ``schedules.model`` (errors land on their field)."""

    name = forms.CharField(max_length=model.NAME_MAX_LENGTH, help_text="Letters, digits, '.', '_' and '-'.")
    kind = forms.ChoiceField(choices=KINDS, label="What to do")
    queue = forms.CharField(required=False, help_text="For a push: the queue.")
    value = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        initial="null",
        help_text="For a push: the item's value, as JSON.",
    )
    priority = forms.IntegerField(required=False, initial=0, help_text="For a push: the item's priority.")
    task = forms.CharField(required=False, help_text="For a task: its dotted path, e.g. myapp.tasks.report.")
    backend = forms.CharField(required=False, initial="default", help_text="For a task: the TASKS alias.")
    kwargs = forms.CharField(required=False, initial="{}", help_text="For a task: keyword arguments, as JSON.")
    cron = forms.CharField(required=False, help_text="A cron expression, e.g. */5 * * * * (or give an interval).")
    interval = forms.FloatField(required=False, help_text="Or: seconds between runs.")
    tz = forms.CharField(initial="UTC", label="Time zone", help_text="An IANA name, e.g. Europe/Paris.")
    catch_up = forms.ChoiceField(
        choices=[(p, p) for p in model.CATCH_UP_POLICIES],
        initial="last",
        help_text=f"Missed runs: fire the last once, all (at most {model.MAX_CATCH_UP}), or none.",
    )

    def _json(self, field: str) -> Any:
        try:
            return json.loads(self.cleaned_data.get(field) or "null")
        except ValueError as error:
            self.add_error(field, f"Not JSON: {error}")
            return None

    def target(self) -> dict[str, Any]:
        data = self.cleaned_data
        if data.get("kind") == "task":
            return {
                "kind": "task",
                "task": data.get("task"),
                "backend": data.get("backend") or "default",
                "args": [],
                "kwargs": self._json("kwargs") or {},
            }
        priority = data.get("priority")
        return {
            "kind": "push",
            "queue": data.get("queue"),
            "value": self._json("value"),
            "priority": 0 if priority is None else priority,
        }

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data  # what Form.clean returns, typed as never None
        if self.errors:
            return data
        data["definition"] = {
            "target": self.target(),
            "cron": data.get("cron") or None,
            "interval": data.get("interval"),
            "tz": data.get("tz"),
            "catch_up": data.get("catch_up"),
        }
        try:
            model.make(data.get("name"), **data["definition"])
        except InvalidArgument as error:
            self._place(error)
        return data

    def _place(self, error: InvalidArgument) -> None:
        """Put the model's refusal on the field it is about."""
        field: str | None = error.context.get("field") or {
            "invalid_queue_name": "queue",
            "invalid_priority": "priority",
        }.get(error.code)
        if field is not None:
            field = {"target": "kind", "args": "kwargs"}.get(field, field)
        self.add_error(field if field in self.fields else None, error.message)

    @classmethod
    def initial_of(cls, schedule: model.Schedule) -> dict[str, Any]:
        target = schedule.target
        return {
            "name": schedule.name,
            "kind": target["kind"],
            "queue": target.get("queue", ""),
            "value": json.dumps(target.get("value")),
            "priority": target.get("priority", 0),
            "task": target.get("task", ""),
            "backend": target.get("backend", "default"),
            "kwargs": json.dumps(target.get("kwargs", {})),
            "cron": schedule.cron or "",
            "interval": schedule.interval,
            "tz": schedule.tz,
            "catch_up": schedule.catch_up,
        }


target_queue = model.target_queue


class ScheduleAdminViews(AdminPages):
    """The schedules page and its actions."""

    ACTIONS = ("pause", "resume", "run-now", "delete")

    def _may(self, request: HttpRequest, action: str, target: dict[str, Any]) -> bool:
        """``action`` on the target's queue (on every queue for a task target)."""
        queue = target_queue(target)
        return access.can_every(request.user, action) if queue is None else self.may(request, action, queue)

    def _require(self, request: HttpRequest, action: str, schedule: model.Schedule) -> None:
        """404 unless the user may see the schedule's queue; 403 unless ``action`` on it."""
        queue = target_queue(schedule.target)
        if queue is None:
            if not access.can_every(request.user, "view"):
                raise Http404(f"No schedule is named {schedule.name!r}.")
            self.require_every(request, action)
        else:
            self.require_on(request, action, queue)

    def _refuse_target(self, request: HttpRequest, form: ScheduleForm) -> bool:
        """Put a form error (and answer True) when the user may not manage the form's target."""
        target = form.cleaned_data["definition"]["target"]
        if not self.refused(request, "manage", target_queue(target)):
            return False
        where = f"the queue “{target_queue(target)}”" if target_queue(target) else "every queue (a task target)"
        form.add_error(None, f"You may not manage {where}, so you may not schedule into it.")
        return True

    def _audit(self, request: HttpRequest, operation: str, name: str, target: dict[str, Any]) -> None:
        self.audit(request, "manage", target_queue(target) or "*", operation=operation, schedule=name)

    def _rows(self, request: HttpRequest) -> list[dict[str, Any]]:
        return [
            {
                "schedule": s,
                "data": model.as_data(s),
                "edit_url": self.url("schedule_edit", s.name),
                "action_url": self.url("schedule_action", s.name),
                "may_manage": self._may(request, "manage", s.target),
            }
            for s in schedules.list_schedules(get_database())
            if self._may(request, "view", s.target)
        ]

    def _list(self, request: HttpRequest, form: ScheduleForm, status: int = 200) -> HttpResponse:
        context = self.context(
            request, "Schedules", rows=self._rows(request), form=form, schedules_url=self.url("schedules")
        )
        return self.render(request, "schedule_list.html", context, status=status)

    @store_guard
    def schedule_list(self, request: HttpRequest) -> HttpResponse:
        """GET: the list and the add form; POST: create from the form."""
        self.require(request, "view")
        if request.method != "POST":
            return self._list(request, ScheduleForm())
        self.require(request, "manage")
        form = ScheduleForm(request.POST)
        if not form.is_valid():
            return self._list(request, form, status=400)
        if self._refuse_target(request, form):
            return self._list(request, form, status=403)
        definition = form.cleaned_data["definition"]
        try:
            schedules.create(get_database(), form.cleaned_data["name"], **definition)
        except ScheduleAlreadyExists as error:
            if self._hidden(request, form.cleaned_data["name"]):
                events.emit(events.REFUSED, "manage")
                form.add_error("name", f"You may not create a schedule named “{form.cleaned_data['name']}”.")
                return self._list(request, form, status=403)
            form.add_error("name", str(error))
            return self._list(request, form, status=400)
        self._audit(request, "create", form.cleaned_data["name"], definition["target"])
        messages.success(request, f"Schedule {form.cleaned_data['name']!r} created.")
        return HttpResponseRedirect(self.url("schedules"))

    @store_guard
    def schedule_edit(self, request: HttpRequest, name: str) -> HttpResponse:
        """GET: the schedule's form; POST: save its new definition (its name stays)."""
        self.require(request, "manage")
        schedule = self._get(name)
        self._require(request, "manage", schedule)
        form = ScheduleForm(request.POST or None, initial=ScheduleForm.initial_of(schedule))
        form.fields["name"].disabled = True
        refused = False
        if request.method == "POST" and form.is_valid():
            refused = self._refuse_target(request, form)
            if not refused:
                schedules.update(get_database(), name, **form.cleaned_data["definition"])
                self._audit(request, "update", name, form.cleaned_data["definition"]["target"])
                messages.success(request, f"Schedule {name!r} saved.")
                return HttpResponseRedirect(self.url("schedules"))
        context = self.context(
            request, f"Edit schedule {name}", form=form, schedule=schedule, schedules_url=self.url("schedules")
        )
        return self.render(
            request, "schedule_edit.html", context, status=403 if refused else 400 if form.errors else 200
        )

    @store_guard
    def schedule_action(self, request: HttpRequest, name: str) -> HttpResponse:
        """POST ``action`` = pause, resume, run-now or delete."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        self.require(request, "manage")
        action = request.POST.get("action", "")
        if action not in self.ACTIONS:
            messages.error(request, f"Unknown action {action!r}.")
            return HttpResponseRedirect(self.url("schedules"))
        schedule = self._get(name)
        self._require(request, "manage", schedule)
        messages.success(request, self._act(action, name))
        self._audit(request, "destroy" if action == "delete" else action, name, schedule.target)
        return HttpResponseRedirect(self.url("schedules"))

    def _act(self, action: str, name: str) -> str:
        db = get_database()
        if action == "pause":
            schedules.pause(db, name)
            return f"Schedule {name!r} paused."
        if action == "resume":
            schedules.resume(db, name)
            return f"Schedule {name!r} resumed."
        if action == "delete":
            schedules.delete(db, name)
            return f"Schedule {name!r} deleted."
        fired = schedules.run_now(db, name)
        return f"Schedule {name!r} ran now: {fired.result['status']} ({fired.result['detail']})."

    def _hidden(self, request: HttpRequest, name: str) -> bool:
        """Whether the schedule holding ``name`` is one the user may not view: its name is then
        refused as one the user may not use, not as taken (the same rule as REST's create)."""
        try:
            holder = schedules.get(get_database(), name)
        except ScheduleNotFound:
            return True  # deleted meanwhile: still not a name to confirm
        return not self._may(request, "view", holder.target)

    def _get(self, name: str) -> model.Schedule:
        try:
            return schedules.get(get_database(), name)
        except (ScheduleNotFound, InvalidArgument) as error:
            raise Http404(str(error)) from error
