"""A demo-only admin page action: enqueue one of the example tasks of ``demo.tasks``.

The reusable app's Tasks page has an empty ``tasks_tools`` block; the demo's template of the same
name fills it with the form that posts here (see ``templates/admin/django_fdbqueue/``).
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.urls import reverse

from django_fdbqueue import access

from . import tasks


class EnqueueExampleForm(forms.Form):
    """Which example to enqueue, and its argument (each example's form sends only its own)."""

    example = forms.ChoiceField(choices=[(name, name) for name in tasks.EXAMPLES])
    below = forms.IntegerField(min_value=0, max_value=tasks.MAX_PRIMES_BELOW, required=False)
    address = forms.EmailField(required=False)
    fail_attempts = forms.IntegerField(min_value=0, max_value=5, required=False)

    NEEDS = {"primes": "below", "email": "address", "flaky": "fail_attempts"}

    def clean(self) -> dict:
        data = super().clean()
        needed = self.NEEDS.get(data.get("example", ""))
        if needed and needed not in self.errors and data.get(needed) in (None, ""):
            self.add_error(needed, "This field is required.")
        return data

    def arguments(self) -> tuple[list, dict]:
        """The chosen task's positional and keyword arguments."""
        data = self.cleaned_data
        if data["example"] == "primes":
            return [data["below"]], {}
        if data["example"] == "email":
            return [data["address"]], {"name": "demo user"}
        return [], {"fail_attempts": data["fail_attempts"]}


def enqueue_example(request: HttpRequest) -> HttpResponse:
    """Enqueue the chosen example and go back to the Tasks page, which now counts it as READY."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    back = reverse("admin:fdbqueue_queue_tasks")
    form = EnqueueExampleForm(request.POST)
    if not form.is_valid():
        problems = "; ".join(f"{name}: {' '.join(errors)}" for name, errors in form.errors.items())
        messages.error(request, f"Nothing was enqueued ({problems}).")
        return HttpResponseRedirect(back)
    task = tasks.EXAMPLES[form.cleaned_data["example"]]
    # Enqueueing pushes to the task's queue: a project's own view asks access.require (403 if not).
    access.require(request.user, "push", task.get_backend().queue_for(task.queue_name))
    args, kwargs = form.arguments()
    result = task.enqueue(*args, **kwargs)
    messages.success(
        request,
        f"Enqueued {task.name} in “{task.queue_name}” (result {result.id}, {result.status}). "
        "A worker runs it: cd demo_project && ../.venv/bin/python manage.py fdbqueue worker --tasks",
    )
    return HttpResponseRedirect(back)
