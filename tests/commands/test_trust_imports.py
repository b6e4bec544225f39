"""Trust: a worker started by `manage.py steady_queue --once` imports only
modules known to hold tasks (pipeline.loader), and still runs the tasks of a
tasks module no other module of the project imports."""

import pytest

from steady_queue.compat import TaskResultStatus
from steady_queue.models import Job

from .. import tasks
from ..stator_app import tasks as lazy_tasks

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


def test_once_runs_a_lazy_tasks_module_and_refuses_a_module_that_holds_none(
    start_supervisor, tmp_path
):
    marker = tmp_path / "imported"
    lazy = lazy_tasks.double_in_pid.enqueue(21)
    tampered = tasks.add.enqueue(1, 1)
    Job.objects.filter(pk=int(tampered.id)).update(
        task_path="tests.import_side_effect.run"
    )

    process = start_supervisor("start", "--once", env={"SQ_IMPORT_MARKER": str(marker)})
    process.wait(timeout=60)
    log = process.log()

    assert process.popen.returncode == 0, log
    lazy.refresh()
    tampered.refresh()
    assert lazy.status == TaskResultStatus.SUCCESSFUL, log
    assert lazy.return_value["doubled"] == 42
    assert tampered.status == TaskResultStatus.FAILED
    error = tampered.errors[-1]
    assert error.exception_class_path == "steady_queue.exceptions.TaskNotFoundError"
    assert (
        "'tests.import_side_effect.run' is in the module 'tests.import_side_effect', "
        "which is not known to hold tasks" in error.traceback
    )
    assert not marker.exists(), "the tampered path's module was imported"
