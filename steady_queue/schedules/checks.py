"""System checks for a backend's recurring tasks (ids steady_queue.E010-E017,
and E019 for a tasks module that cannot be imported to find them)."""

from django.apps import apps
from django.core import checks

from .specs import static_specs
from .validation import duplicate_keys, problems


def check_recurring(options):
    """Return an Error per problem with the static tasks a backend's scheduler runs."""
    try:
        specs = static_specs(options)
    except Exception as error:
        # Finding the @recurring tasks imports every app's tasks module: one
        # that raises (a queue QUEUES does not list, a typo) is reported here,
        # where `check` and every command's checks print it, not as a
        # traceback out of every command, migrate included.
        return [_unimportable_tasks_module(error)]
    found = [problem for spec in specs for problem in problems(spec)]
    found.extend(duplicate_keys(specs))
    return [checks.Error(message, hint=hint, id=id) for id, message, hint in found]


def _unimportable_tasks_module(error):
    module = _raising_module(error)
    where = f"The tasks module {module!r}" if module else "A tasks module"
    command = (
        f"python manage.py shell -c 'import {module}'" if module else "importing it"
    )
    return checks.Error(
        f"{where} raised {type(error).__name__} as it was imported: {error}",
        hint=f"Fix that module; {command} shows the whole traceback.",
        id="steady_queue.E019",
    )


def _raising_module(error):
    """The innermost app's tasks module (or a module of its tasks package)
    whose code was running when ``error`` was raised, or None."""
    prefixes = tuple(f"{app.name}.tasks" for app in apps.get_app_configs())
    found = None
    trace = error.__traceback__
    while trace is not None:
        name = trace.tb_frame.f_globals.get("__name__") or ""
        if name.startswith(prefixes) and name.partition(".tasks")[2][:1] in ("", "."):
            found = name
        trace = trace.tb_next
    return found
