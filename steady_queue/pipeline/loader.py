"""Finds the task a job row names, refusing anything that is not a project task.

A row's ``task_path`` is data: anyone who can write to the jobs table can put
any dotted path there. Importing a module runs its top-level code, so the path
is checked against the project's own packages *before* anything is imported,
and only objects made by ``@task`` are returned.
"""

import sys
from functools import cache

from django.apps import apps
from django.conf import settings
from django.utils.module_loading import import_string

from ..compat import Task
from ..exceptions import TaskNotFoundError

_loaded = {}


def load_task(task_path):
    """Return the Task at ``task_path`` or raise TaskNotFoundError.

    Nothing is imported unless the path lies in an installed app or in the
    package holding the settings module; whatever the import raises (even
    SystemExit) becomes TaskNotFoundError. Successful look-ups are cached per
    process.
    """
    task = _loaded.get(task_path)
    if task is not None:
        return task
    refuse_paths_outside_the_project(task_path)
    try:
        found = import_string(task_path)
    except ImportError as e:
        raise TaskNotFoundError(
            f"The task {task_path!r} cannot be imported ({e}). Was it renamed or "
            "removed after this job was enqueued? Deploy code that still defines it, "
            "or discard the job."
        ) from e
    except (Exception, SystemExit) as e:
        # A module that raises at import (or calls sys.exit) must fail this
        # job, not the worker that happened to claim it.
        raise TaskNotFoundError(
            f"Importing the task {task_path!r} raised {type(e).__name__}: {e}. "
            "Fix the module's import-time code, then retry the job."
        ) from e
    if not isinstance(found, Task):
        kind = type(found)
        raise TaskNotFoundError(
            f"{task_path!r} is a {kind.__module__}.{kind.__qualname__}, not a task; "
            "only functions decorated with @task are run, so nothing was called."
        )
    _loaded[task_path] = found
    return found


def tasks_by_path(paths):
    """{path: Task, or None where the path names no loadable task}."""
    found = {}
    for path in paths:
        try:
            found[path] = load_task(path)
        except TaskNotFoundError:
            found[path] = None
    return found


def missing_task(*args, **kwargs):
    """Stands in, in results, for a job whose task path no longer loads."""
    raise TaskNotFoundError("This job's task no longer exists; nothing was run.")


def refuse_paths_outside_the_project(task_path):
    """Raise TaskNotFoundError unless ``task_path`` may be imported to find a task."""
    module_path = task_path.rpartition(".")[0] if isinstance(task_path, str) else ""
    parts = module_path.split(".")
    if not module_path or any(not part.isidentifier() for part in parts):
        raise TaskNotFoundError(
            f"{task_path!r} is not a dotted path to a task; nothing was imported."
        )
    if any(part.startswith("__") for part in parts):
        # __main__ modules run a command line when imported.
        raise TaskNotFoundError(
            f"{task_path!r} names a dunder module; tasks are never loaded from "
            "one, so nothing was imported."
        )
    if module_path in sys.modules or is_project_module(module_path):
        return
    raise TaskNotFoundError(
        f"{task_path!r} is outside the project's packages (the installed apps and "
        "the package of the settings module), so it was not imported. Define "
        "tasks in an installed app."
    )


def is_project_module(module_path):
    """Whether tasks may be loaded from this module (see load_task)."""
    return any(
        module_path == package or module_path.startswith(package + ".")
        for package in _project_packages()
    )


@cache
def _project_packages():
    packages = {config.name for config in apps.get_app_configs()}
    settings_module = getattr(settings, "SETTINGS_MODULE", None)
    if settings_module and "." in settings_module:
        packages.add(settings_module.rpartition(".")[0])
    return frozenset(packages)
