"""Where tasks may live: one rule, at enqueue and in the worker (pipeline.loader).

Each case builds real packages on disk: a library whose AppConfig an installed
app extends (Wagtail's search app and modelsearch), a project package under a
settings layout of several levels (``mysite.settings.dev``), a library named
in STEADY_QUEUE_TASK_PACKAGES, and a module outside all of them that must
never be imported.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from steady_queue.backend import SteadyQueueBackend
from steady_queue.compat import InvalidTask, TaskResultStatus
from steady_queue.exceptions import TaskNotFoundError
from steady_queue.models import Job
from steady_queue.pipeline import loader
from steady_queue.pipeline.loader import load_task, task_packages
from steady_queue.project_checks import check_task_packages

from .. import tasks

pytestmark = pytest.mark.django_db

TASK_MODULE = """
from steady_queue.compat import task
open({marker!r}, "a").close()

@task
def run(n):
    return n * 2
"""


@pytest.fixture
def packages(tmp_path, monkeypatch):
    """Write modules under tmp_path, importable; forget them at teardown.

    ``write("pkg/tasks.py")`` writes a task module (and the packages' empty
    ``__init__`` files) that leaves a marker file when it is imported;
    ``imported(name)`` says whether it was.
    """
    monkeypatch.syspath_prepend(str(tmp_path))
    written = []

    class Packages:
        root = tmp_path

        def write(self, path, text=None):
            module = path.removesuffix(".py").replace("/", ".")
            marker = tmp_path / f"{module}.imported"
            file = tmp_path / path
            file.parent.mkdir(parents=True, exist_ok=True)
            for parent in file.relative_to(tmp_path).parents:
                if str(parent) != ".":
                    (tmp_path / parent / "__init__.py").touch()
            file.write_text(
                textwrap.dedent(text or TASK_MODULE.format(marker=str(marker)))
            )
            written.append(module.partition(".")[0])
            return module

        def imported(self, module):
            return (tmp_path / f"{module}.imported").exists()

    yield Packages()
    task_packages.cache_clear()
    for name in list(sys.modules):
        if name.partition(".")[0] in written:
            del sys.modules[name]
    for path in list(loader._loaded):
        if path.partition(".")[0] in written:
            del loader._loaded[path]


def enqueue_and_load(module):
    """Enqueue the module's task, then load it back as a worker would."""
    task = __import__(module, fromlist=["run"]).run
    result = task.enqueue(21)
    assert load_task(f"{module}.run") is task
    return result


def test_a_library_whose_app_config_an_installed_app_extends(packages):
    # modelsearch is no installed app: wagtail.search's AppConfig extends its.
    packages.write(
        "sq_searchlib/apps.py",
        "from django.apps import AppConfig\n"
        "class SearchLibConfig(AppConfig):\n    name = 'sq_searchlib'\n",
    )
    packages.write(
        "sq_cms/apps.py",
        "from sq_searchlib.apps import SearchLibConfig\n"
        "class CmsSearchConfig(SearchLibConfig):\n"
        "    name = 'sq_cms'\n    label = 'sq_cms'\n",
    )
    module = packages.write("sq_searchlib/tasks.py")
    with override_settings(
        INSTALLED_APPS=[*_installed(), "sq_cms.apps.CmsSearchConfig"]
    ):
        result = enqueue_and_load(module)
    assert result.status == TaskResultStatus.READY


@pytest.mark.parametrize(
    "settings_module",
    ["sq_site.settings", "sq_site.settings.dev", "sq_site.conf.settings.local"],
)
def test_the_project_package_whatever_the_settings_layout(packages, settings_module):
    module = packages.write("sq_site/tasks.py")
    with override_settings(SETTINGS_MODULE=settings_module):
        enqueue_and_load(module)


def test_a_package_named_in_the_setting(packages):
    module = packages.write("sq_reportlib/tasks/reports.py")
    __import__(module)
    with pytest.raises(InvalidTask, match="STEADY_QUEUE_TASK_PACKAGES"):
        sys.modules[module].run.enqueue(1)
    assert not Job.objects.exists(), "a refused enqueue wrote a row"

    with override_settings(STEADY_QUEUE_TASK_PACKAGES=["sq_reportlib"]):
        enqueue_and_load(module)


def test_the_refusal_names_the_module_and_the_setting_and_writes_nothing(packages):
    module = packages.write("sq_elsewhere/tasks.py")
    __import__(module)
    with pytest.raises(InvalidTask) as refused:
        sys.modules[module].run.enqueue(1)
    message = str(refused.value)
    assert "'sq_elsewhere.tasks'" in message
    # The common case first: an app of the project not yet installed.
    assert message.index("add it to INSTALLED_APPS") < message.index(
        "add 'sq_elsewhere' to the STEADY_QUEUE_TASK_PACKAGES setting"
    )
    assert "Nothing was enqueued" in message
    assert not Job.objects.exists()


def test_a_worker_refuses_the_same_module_without_importing_it(packages):
    module = packages.write("sq_elsewhere/tasks.py")
    with pytest.raises(TaskNotFoundError, match="STEADY_QUEUE_TASK_PACKAGES"):
        load_task(f"{module}.run")
    assert not packages.imported(module)
    with override_settings(STEADY_QUEUE_TASK_PACKAGES=["sq_elsewhere"]):
        assert load_task(f"{module}.run").call(4) == 8
    assert packages.imported(module)


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("os.system", "outside the packages tasks are loaded from"),
        ("venv.__main__.main", "dunder module"),
        ("tests.__main__.run", "dunder module"),
        ("tests.tasks.not_a_task", "not a task"),
    ],
)
def test_tampered_paths_are_refused(path, says):
    with pytest.raises(TaskNotFoundError, match=says):
        load_task(path)
    assert "venv.__main__" not in sys.modules


def test_the_setting_is_checked():
    with override_settings(STEADY_QUEUE_TASK_PACKAGES="modelsearch"):
        (error,) = check_task_packages()
    assert error.id == "steady_queue.E007"
    assert "'modelsearch'" in error.msg
    for bad in (["ok", 3], ["not a.package"], [""]):
        with override_settings(STEADY_QUEUE_TASK_PACKAGES=bad):
            assert [e.id for e in check_task_packages()] == ["steady_queue.E007"]
    with override_settings(STEADY_QUEUE_TASK_PACKAGES=["modelsearch", "a.b"]):
        assert check_task_packages() == []


def test_installed_app_tasks_still_run():
    result = tasks.add.enqueue(1, 2)
    assert load_task("tests.tasks.add") is tasks.add
    assert result.status == TaskResultStatus.READY


def test_without_the_app_installed_the_backend_says_so_before_writing():
    backend = SteadyQueueBackend("default", {"OPTIONS": {}})
    installed = [app for app in _installed() if app != "steady_queue"]
    with override_settings(INSTALLED_APPS=installed):
        with pytest.raises(ImproperlyConfigured) as refused:
            backend.enqueue(tasks.add, (1, 2), {})
    assert "'steady_queue' is not in INSTALLED_APPS" in str(refused.value)
    # No check id: `manage.py check` cannot report E001 where this is raised.
    assert str(refused.value).endswith(
        "Add 'steady_queue' to INSTALLED_APPS and run migrate."
    )
    assert not Job.objects.exists()


def _installed():
    from django.conf import settings

    return list(settings.INSTALLED_APPS)


def test_the_project_package_is_the_same_inside_override_settings():
    with override_settings(DEBUG=True):
        assert loader.project_package() == "tests"


@pytest.mark.parametrize("first", ["inside", "outside"])
def test_a_project_task_first_enqueued_under_override_settings_stays_allowed(
    packages, first
):
    module = packages.write("sq_site/tasks.py")
    task = __import__(module, fromlist=["run"]).run
    # Stands for the project's own settings module, sq_site.settings.
    with override_settings(SETTINGS_MODULE="sq_site.settings"):
        if first == "inside":
            with override_settings(DEBUG=True):
                task.enqueue(1)
            task.enqueue(2)
        else:
            task.enqueue(1)
            with override_settings(DEBUG=True):
                task.enqueue(2)
    assert Job.objects.count() == 2


SHELL_CODE = """
from steady_queue.compat import task

@task
def shout(text):
    return text.upper()

try:
    shout.enqueue("hi")
except Exception as error:
    print(type(error).__name__, error)
"""


def test_a_task_defined_in_a_script_is_refused_as_one_no_worker_can_import():
    namespace = {"__name__": "__main__"}
    exec(SHELL_CODE.replace("print(", "refused = ("), namespace)

    assert str(namespace["refused"][1]) == (
        "Task '__main__.shout' was defined in the shell or a script (module "
        "'__main__'), so no worker can run it: a worker imports each task by its "
        "module path. Define the task in a module of an installed app (e.g. "
        "shop/tasks.py) and import it from there. Nothing was enqueued."
    )
    assert not Job.objects.exists()


def test_a_task_defined_in_manage_py_shell_is_refused_as_one_no_worker_can_import():
    root = Path(__file__).resolve().parents[2]
    ran = subprocess.run(
        [sys.executable, str(root / "tests" / "manage.py"), "shell", "-c", SHELL_CODE],
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
    )

    # The last line: Django 5.2's shell first says what it imported, and the
    # backport names the exception InvalidTaskError.
    assert ran.stdout.strip().splitlines()[-1] == (
        f"{InvalidTask.__name__} Task "
        "'django.core.management.commands.shell.shout' was defined in the "
        "shell or a script (module "
        "'django.core.management.commands.shell'), so no worker can run it: a "
        "worker imports each task by its module path. Define the task in a module "
        "of an installed app (e.g. shop/tasks.py) and import it from there. "
        "Nothing was enqueued."
    ), ran.stdout + ran.stderr


def test_a_module_of_an_allowed_package_that_is_no_task_module_is_never_imported(
    packages,
):
    # A management command of the project: a row naming it must not run it.
    module = packages.write("sq_site/management/commands/wipe.py")
    with override_settings(SETTINGS_MODULE="sq_site.settings"):
        with pytest.raises(TaskNotFoundError) as refused:
            load_task(f"{module}.run")
        assert not packages.imported(module)
        assert str(refused.value) == (
            "'sq_site.management.commands.wipe.run' is in the module "
            "'sq_site.management.commands.wipe', which is not known to hold tasks, "
            "so a worker does not import it: put the task in a tasks module of an "
            "installed app (e.g. shop/tasks.py, or shop/tasks/mail.py), or add "
            "'sq_site.management.commands.wipe' to the STEADY_QUEUE_TASK_MODULES "
            "setting; nothing was imported."
        )

        with override_settings(STEADY_QUEUE_TASK_MODULES=["sq_site.management"]):
            assert load_task(f"{module}.run").call(4) == 8
        assert packages.imported(module)


@pytest.mark.parametrize("module", ["sq_site/tasks.py", "sq_site/tasks/mail.py"])
def test_a_tasks_module_nothing_imported_yet_is_imported_on_its_first_job(
    packages, module
):
    module = packages.write(module)
    with override_settings(SETTINGS_MODULE="sq_site.settings"):
        assert load_task(f"{module}.run").call(4) == 8
    assert packages.imported(module)


@pytest.mark.parametrize("name", ["models", "views", "workflow"])
def test_a_module_no_worker_imports_is_refused_at_enqueue_with_the_worker_s_words(
    packages, name
):
    # Imported in the enqueuing process (by the app registry, the URLconf, a
    # view), but no worker imports it before its first job: refused at once,
    # not after ten minutes of handbacks.
    module = packages.write(f"sq_site/{name}.py")
    task = __import__(module, fromlist=["run"]).run
    with override_settings(SETTINGS_MODULE="sq_site.settings"):
        with pytest.raises(InvalidTask) as refused:
            task.enqueue(1)
        assert not Job.objects.exists(), "a refused enqueue wrote a row"
        said = (
            f"'{module}.run' is in the module '{module}', which is not known to "
            "hold tasks, so a worker does not import it: put the task in a tasks "
            "module of an installed app (e.g. shop/tasks.py, or shop/tasks/mail.py), "
            f"or add '{module}' to the STEADY_QUEUE_TASK_MODULES setting"
        )
        assert str(refused.value) == f"{said}. Nothing was enqueued."
        # A worker, even one that has the module imported, says the same.
        with pytest.raises(TaskNotFoundError) as failed:
            load_task(f"{module}.run")
        assert str(failed.value) == f"{said}; nothing was imported."

        with override_settings(STEADY_QUEUE_TASK_MODULES=[module]):
            enqueue_and_load(module)


def test_a_tasks_package_below_an_app_s_own_is_never_imported(packages):
    # Only an app's (or a task package's) own tasks module holds tasks: a
    # "tasks" folder deeper down (a script's, a vendored library's) does not.
    module = packages.write("sq_site/scripts/tasks/wipe.py")
    with override_settings(SETTINGS_MODULE="sq_site.settings"):
        with pytest.raises(TaskNotFoundError, match="not known to hold tasks"):
            load_task(f"{module}.run")
        assert not packages.imported(module)
        assert "sq_site.scripts" not in sys.modules


def test_a_side_effect_at_import_never_happens_for_a_tampered_path(
    tmp_path, monkeypatch
):
    marker = tmp_path / "imported"
    monkeypatch.setenv("SQ_IMPORT_MARKER", str(marker))
    with pytest.raises(TaskNotFoundError, match="not known to hold tasks"):
        load_task("tests.import_side_effect.run")
    assert not marker.exists()
    assert "tests.import_side_effect" not in sys.modules


def test_steady_queue_s_own_tasks_load_by_name():
    assert loader.is_task_module("steady_queue.housekeeping")
    assert not loader.is_task_module("steady_queue.management.commands.steady_queue")


def test_the_modules_setting_is_checked():
    for bad in ("tests.poison", ["ok", 3], ["not a.module"], [""]):
        with override_settings(STEADY_QUEUE_TASK_MODULES=bad):
            (error,) = check_task_packages()
        assert error.id == "steady_queue.E007"
        assert "settings.STEADY_QUEUE_TASK_MODULES" in error.msg
    with override_settings(STEADY_QUEUE_TASK_MODULES=["shop.emails", "a"]):
        assert check_task_packages() == []


def test_a_module_that_is_not_there_is_said_to_be_missing_without_importing(
    packages,
):
    # The package's __init__ acts too: looking for its module imports nothing.
    packages.write(
        "sq_site/scripts/__init__.py",
        f"open({str(packages.root / 'init.imported')!r}, 'w').close()\n",
    )
    with override_settings(SETTINGS_MODULE="sq_site.settings"):
        with pytest.raises(TaskNotFoundError) as refused:
            load_task("sq_site.scripts.gone.run")
    assert str(refused.value) == (
        "The task 'sq_site.scripts.gone.run' cannot be imported (no module named "
        "'sq_site.scripts.gone'). Was it renamed or removed after this job was "
        "enqueued? Deploy code that still defines it, or discard the job; nothing "
        "was imported."
    )
    assert not (packages.root / "init.imported").exists()
    assert "sq_site.scripts" not in sys.modules
