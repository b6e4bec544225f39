"""docs/task-keywords.rst's example, pasted into a new project as it is: the
keyword task enqueues, merges a duplicate (unique=True), runs in a worker,
and has the settings its decorator twin has (Django 6.1, the backport)."""

import pytest

from .docs_blocks import code_blocks, readme_block
from .keyword_tasks import TAKES_KEYWORDS
from .new_site import MARKS, Project

pytestmark = [
    *MARKS,
    pytest.mark.skipif(
        not TAKES_KEYWORDS,
        reason="Django 6.0's @task passes no extra keywords to the backend",
    ),
]


def test_the_keyword_example_runs_as_pasted(tmp_path):
    keywords, decorators = code_blocks("task-keywords.rst")
    assert keywords.startswith("# shop/tasks.py\n")
    project = Project.start(tmp_path / "site")
    project.configure(
        readme_block('"BACKEND": "steady_queue.backend.SteadyQueueBackend"'),
        project.installed_apps("shop"),
    )
    project.write("shop/tasks.py", keywords)
    # The decorator twin, beside it in the same module, named apart.
    twin = decorators.replace("def charge(", "def charge_by_decorators(")
    project.write("shop/twin.py", "from shop.tasks import account_of\n" + twin)
    project.manage("migrate")

    answer = project.shell(
        """
        from shop.tasks import charge
        from shop.twin import charge_by_decorators as twin
        from steady_queue.decorators import concurrency, rate, retries, timeouts, unique

        def same(module):
            attribute = module.ATTRIBUTE
            return getattr(charge.func, attribute) == getattr(twin.func, attribute)

        first = charge.enqueue(7, 100)
        again = charge.enqueue(7, 100)
        settings = [same(m) for m in (concurrency, rate, retries, timeouts, unique)]
        print("=>", first.id == again.id, all(settings), settings)
        """
    )
    assert answer.startswith("True True"), answer
    ran = project.manage("steady_queue", "--once").stdout
    assert ran.startswith("Ran 1 job(s)"), ran
