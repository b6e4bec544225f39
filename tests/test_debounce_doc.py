"""docs/failures.rst's @debounce example, pasted into a new project as it is:
the module as shop/tasks.py, the enqueues in its shell; then a worker runs
the burst's one job once its quiet period is over."""

from .docs_blocks import code_blocks, readme_block
from .helpers import wait_for
from .new_site import MARKS, Project, for_this_django

pytestmark = MARKS


def debounce_blocks():
    """The page's two blocks that use reindex_listing: module, then calls."""
    return [
        block for block in code_blocks("failures.rst") if "reindex_listing" in block
    ]


def test_the_debounce_example_runs_as_pasted(tmp_path):
    module, calls = debounce_blocks()
    assert module.startswith("# shop/tasks.py\n")
    project = Project.start(tmp_path / "site")
    project.configure(
        readme_block('"BACKEND": "steady_queue.backend.SteadyQueueBackend"'),
        project.installed_apps("shop"),
    )
    project.write("shop/tasks.py", for_this_django(module))
    project.manage("migrate")

    answer = project.shell(
        calls
        + "\nfrom steady_queue.models import Job\n"
        + "job = Job.objects.get()\n"
        + 'print("=>", Job.objects.count(), job.scheduled_at > job.enqueued_at)\n'
    )
    assert answer == "1 True", answer

    # Due two seconds after the burst: a worker then runs it, once.
    wait_for(
        lambda: project.manage("steady_queue", "--once").stdout.startswith("Ran 1"),
        timeout=30,
        message="the burst's run came due and ran",
    )
