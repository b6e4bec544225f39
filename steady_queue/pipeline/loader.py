"""Finds the task a job row names, refusing anything that is not a project task.

A row's ``task_path`` is data: anyone who can write to the jobs table can put
any dotted path there. Importing a module runs its top-level code, so the path
is checked against the packages tasks may live in *before* anything is
imported, and only objects made by ``@task`` are returned.

One rule decides, at enqueue and in the worker alike (``task_module_refusal``):
a task may live in

- an installed app's package, or the package of an AppConfig an installed app
  extends (``wagtail.search`` extends ``modelsearch``'s, whose tasks it runs);
- the project package: the top-level package of the settings module, however
  the settings are laid out (``mysite.settings.dev`` -> ``mysite``);
- a package named in the ``STEADY_QUEUE_TASK_PACKAGES`` setting.

Inside those packages a worker imports only modules that say they hold
tasks (``module_import_refusal``): a package's ``tasks`` module, or a module
of its ``tasks`` package (``shop.tasks``, ``shop.tasks.emails``), steady_queue's
own, or one named in the ``STEADY_QUEUE_TASK_MODULES`` setting. Any other
module (a management command, a script, a view) is refused unimported, even
one some process happens to have imported: enqueue refuses it too, so a job no
worker would run is never written.
"""

import sys
from functools import cache
from importlib.machinery import PathFinder
from importlib.util import find_spec

from django.apps import AppConfig, apps
from django.conf import UserSettingsHolder, settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

from ..compat import TASK_TYPES
from ..exceptions import TaskNotFoundError

TASK_PACKAGES_SETTING = "STEADY_QUEUE_TASK_PACKAGES"
TASK_MODULES_SETTING = "STEADY_QUEUE_TASK_MODULES"

# Only a schedule names them (OPTIONS["clear_finished_jobs_schedule"]), so
# nothing imports them before a worker needs one.
OWN_TASK_MODULES = frozenset({"steady_queue.housekeeping"})

_loaded = {}


def load_task(task_path):
    """Return the Task at ``task_path`` or raise TaskNotFoundError.

    Nothing is imported unless the path lies in a package tasks may live in,
    in a module known to hold tasks (see the module's docstring); whatever
    the import raises (even SystemExit) becomes TaskNotFoundError.
    Successful look-ups are cached per process.
    """
    task = _loaded.get(task_path)
    if task is not None:
        return task
    refusal = task_path_refusal(task_path)
    if refusal is not None:
        raise TaskNotFoundError(
            f"{refusal}; nothing was imported.", getattr(refusal, "missing", None)
        )
    try:
        found = import_string(task_path)
    except ImportError as e:
        raise TaskNotFoundError(
            cannot_be_imported(f"{task_path!r}", e) + ".", str(e)
        ) from e
    except (Exception, SystemExit) as e:
        # A module that raises at import (or calls sys.exit) must fail this
        # job, not the worker that happened to claim it.
        raise TaskNotFoundError(
            f"Importing the task {task_path!r} raised {type(e).__name__}: {e}. "
            "Fix the module's import-time code, then retry the job."
        ) from e
    if not isinstance(found, TASK_TYPES):
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


def task_path_refusal(task_path):
    """Why no task is loaded from ``task_path``, or None when one may be."""
    module_path = task_path.rpartition(".")[0] if isinstance(task_path, str) else ""
    parts = module_path.split(".")
    if not module_path or any(not part.isidentifier() for part in parts):
        return f"{task_path!r} is not a dotted path to a task"
    return task_source_refusal(module_path, f"{task_path!r}")


def task_source_refusal(module_path, what):
    """Why a worker will not load a task from ``module_path``, or None.

    The whole rule (the module's docstring): the backend's enqueue asks it
    of each task, the worker of each row's path, so a task is refused at
    enqueue exactly when no worker would run it. ``what`` names the task.
    """
    return task_module_refusal(module_path, what) or module_import_refusal(
        module_path, what
    )


def module_import_refusal(module_path, what):
    """Why a worker will not import ``module_path`` to find a task, or None.

    Importing runs a module's top-level code, which a row's path must not be
    able to start in a module that defines no task (a management command, a
    migration script). Whether some process imported the module already is
    left out: the enqueuing process always has, a worker may never.
    """
    if is_task_module(module_path):
        return None
    if not can_be_found(module_path):
        return cannot_be_imported(what, f"no module named {module_path!r}")
    return (
        f"{what} is in the module {module_path!r}, which is not known to hold "
        "tasks, so a worker does not import it: put the task in a tasks module "
        "of an installed app (e.g. shop/tasks.py, or shop/tasks/mail.py), or "
        f"add {module_path!r} to the {TASK_MODULES_SETTING} setting"
    )


class Unimportable(str):
    """A refusal's sentence that keeps why the task is not there (``missing``)."""

    missing = None


def cannot_be_imported(what, reason):
    """The sentence for a job whose task's module or name is not (or no
    longer) there; it keeps ``reason`` as its ``missing``."""
    sentence = Unimportable(
        f"The task {what} cannot be imported ({reason}). Was it renamed or "
        "removed after this job was enqueued? Deploy code that still defines it, "
        "or discard the job"
    )
    sentence.missing = str(reason)
    return sentence


def can_be_found(module_path):
    """Whether an importer would find ``module_path``, asked without importing
    anything: not even its packages, whose ``__init__`` may act too.

    Only the message depends on it, so a finder it cannot ask counts as found.
    """
    parts = module_path.split(".")
    try:
        spec = find_spec(parts[0])
        for depth in range(2, len(parts) + 1):
            if spec is None or spec.submodule_search_locations is None:
                return False
            parent = sys.modules.get(".".join(parts[: depth - 1]))
            locations = getattr(parent, "__path__", spec.submodule_search_locations)
            spec = PathFinder.find_spec(".".join(parts[:depth]), list(locations))
    except (ImportError, ValueError):
        return True
    return spec is not None


def is_task_module(module_path):
    """Whether ``module_path`` says it holds tasks: it is, or lies in, the
    ``tasks`` module of a package tasks may live in, or is named by
    steady_queue or the setting."""
    if module_path in OWN_TASK_MODULES:
        return True
    # A package's own tasks module only: a "tasks" folder deeper down (a
    # script's, a vendored library's) is no sign of a task.
    tasks_modules = [package + ".tasks" for package in task_packages()]
    return any(
        module_path == name or module_path.startswith(name + ".")
        for name in [*tasks_modules, *extra_names(TASK_MODULES_SETTING)]
    )


def task_module_refusal(module_path, what):
    """Why tasks are not loaded from the module ``module_path``, or None.

    ``what`` names the task in the sentence. Enqueue and the worker both ask
    this, so a task is refused at enqueue exactly when no worker would run it.
    """
    parts = module_path.split(".")
    if any(part.startswith("__") for part in parts):
        # __main__ modules run a command line when imported; a task defined in
        # a script run as __main__ has no path another process could import.
        return (
            f"{what} is in the module {module_path!r}, a dunder module, which "
            "tasks are never loaded from: define the task in a module of its own"
        )
    if any(
        module_path == package or module_path.startswith(package + ".")
        for package in task_packages()
    ):
        return None
    return (
        f"{what} is in the module {module_path!r}, outside the packages tasks are "
        f"loaded from ({describe_task_packages()}). If {parts[0]!r} is an app "
        "of this project, add it to INSTALLED_APPS; or move the task into an "
        f"installed app; or, for a package that is not an app, add {parts[0]!r} "
        f"to the {TASK_PACKAGES_SETTING} setting"
    )


def defined_in_a_shell_refusal(task):
    """Why ``task``, defined in a shell or a script, cannot run; else None.

    Such a function's module is ``__main__``, or the module that ran the code
    (``manage.py shell`` runs it in django.core.management.commands.shell),
    where its name is not defined: its path leads a worker nowhere.
    """
    module_name = task.func.__module__
    module = sys.modules.get(module_name) if module_name != "__main__" else None
    found = getattr(module, task.func.__qualname__, None)
    if getattr(found, "func", None) is task.func:
        return None
    return (
        f"Task {task.module_path!r} was defined in the shell or a script (module "
        f"{module_name!r}), so no worker can run it: a worker imports each task "
        "by its module path. Define the task in a module of an installed app "
        "(e.g. shop/tasks.py) and import it from there"
    )


@cache
def task_packages():
    """The packages tasks may live in, by the rule in the module's docstring."""
    return frozenset(
        {
            *installed_app_packages(),
            *filter(None, [project_package()]),
            *extra_task_packages(),
        }
    )


@receiver(setting_changed)
def _forget_task_packages(setting, **kwargs):
    # Tests change these settings with override_settings; a server never does.
    if setting in {"INSTALLED_APPS", "SETTINGS_MODULE", TASK_PACKAGES_SETTING}:
        task_packages.cache_clear()


def installed_app_packages():
    """Each installed app's package, and the packages of AppConfigs it extends."""
    packages = set()
    for config in apps.get_app_configs():
        packages.add(config.name)
        for base in type(config).__mro__[1:]:
            if base is AppConfig:
                break
            packages.add(base.__module__.rpartition(".")[0] or base.__module__)
    return packages


def project_package():
    """The top-level package of the settings module, or None if it has none."""
    settings_module = settings_module_name() or ""
    if "." not in settings_module:
        # A top-level settings.py: its directory is no package to trust.
        return None
    return settings_module.partition(".")[0]


def settings_module_name():
    """The settings module's dotted name, also inside override_settings().

    An override's settings report SETTINGS_MODULE as None unless the override
    sets it; read it from the settings the override stands on instead, so a
    task first enqueued in a test's override is not refused ever after.
    """
    # Reading a setting first sets up lazy settings, so _wrapped is real.
    named = getattr(settings, "SETTINGS_MODULE", None)
    layer = settings._wrapped
    while isinstance(layer, UserSettingsHolder):
        if "SETTINGS_MODULE" in vars(layer):
            return layer.SETTINGS_MODULE
        layer = layer.default_settings
    return getattr(layer, "SETTINGS_MODULE", named)


def extra_task_packages():
    """The STEADY_QUEUE_TASK_PACKAGES setting's names (check E007 reports bad ones)."""
    return extra_names(TASK_PACKAGES_SETTING)


def extra_names(setting):
    """The dotted names a list setting holds; a malformed one holds none."""
    names = getattr(settings, setting, ())
    if isinstance(names, str) or not isinstance(names, list | tuple):
        return []
    return [name for name in names if isinstance(name, str) and name]


def describe_task_packages():
    """The sources of task packages, for error messages."""
    project = project_package()
    sources = ["the installed apps and the AppConfigs they extend"]
    if project:
        sources.append(f"the project package {project!r}")
    sources.append(f"settings.{TASK_PACKAGES_SETTING}")
    return ", ".join(sources[:-1]) + " and " + sources[-1]
