"""The one module that imports the task framework.

Django 6.0+ ships ``django.tasks``; on Django 5.2 the ``django-tasks`` backport
provides the same API under ``django_tasks`` with a few renamed exceptions and
its own signal objects. Everything else in steady_queue imports from here.
"""

import importlib.util

if importlib.util.find_spec("django.tasks") is not None:
    from django.tasks import (
        DEFAULT_TASK_BACKEND_ALIAS,
        DEFAULT_TASK_QUEUE_NAME,
        Task,
        TaskContext,
        TaskResult,
        TaskResultStatus,
        task,
        task_backends,
    )
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY, TaskError
    from django.tasks.exceptions import (
        InvalidTask,
        InvalidTaskBackend,
        TaskResultDoesNotExist,
        TaskResultMismatch,
    )
    from django.tasks.signals import task_enqueued, task_finished, task_started
    from django.utils.json import normalize_json

    FRAMEWORK = "django.tasks"
    FRAMEWORK_APP = None
else:  # pragma: no cover - exercised by the Django 5.2 test run
    try:
        from django_tasks import (
            DEFAULT_TASK_BACKEND_ALIAS,
            DEFAULT_TASK_QUEUE_NAME,
            TaskContext,
            TaskResult,
            TaskResultStatus,
            task,
            task_backends,
        )
    except ImportError as e:
        raise ImportError(
            "steady_queue needs Django's task framework: use Django 6.0 or newer, "
            "or on Django 5.2 install the backport with "
            "'pip install steady-queue[compat]'."
        ) from e
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import (
        TASK_MAX_PRIORITY,
        TASK_MIN_PRIORITY,
        Task,
        TaskError,
    )
    from django_tasks.exceptions import TaskResultDoesNotExist, TaskResultMismatch
    from django_tasks.signals import task_enqueued, task_finished, task_started
    from django_tasks.utils import normalize_json

    # The backport renamed these on its main branch; accept either spelling.
    try:
        from django_tasks.exceptions import InvalidTask, InvalidTaskBackend
    except ImportError:
        from django_tasks.exceptions import (
            InvalidTaskBackendError as InvalidTaskBackend,
        )
        from django_tasks.exceptions import InvalidTaskError as InvalidTask

    FRAMEWORK = "django_tasks"
    FRAMEWORK_APP = "django_tasks"

# Wagtail 8 and other libraries define their tasks with the django-tasks
# backport even on Django 6.x, where both frameworks are installed side by
# side and share the TASKS setting: their Task objects reach our backend too.
TASK_TYPES = (Task,)
if FRAMEWORK == "django.tasks" and importlib.util.find_spec("django_tasks"):
    try:
        from django_tasks.base import Task as BackportTask
    except ImportError:  # pragma: no cover - a django_tasks we do not know
        pass
    else:
        TASK_TYPES = (Task, BackportTask)

__all__ = [
    "DEFAULT_TASK_BACKEND_ALIAS",
    "DEFAULT_TASK_QUEUE_NAME",
    "FRAMEWORK",
    "FRAMEWORK_APP",
    "TASK_MAX_PRIORITY",
    "TASK_MIN_PRIORITY",
    "TASK_TYPES",
    "BaseTaskBackend",
    "InvalidTask",
    "InvalidTaskBackend",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultMismatch",
    "TaskResultStatus",
    "normalize_json",
    "task",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]
