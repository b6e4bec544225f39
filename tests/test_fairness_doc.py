"""docs/fairness.rst's examples, pasted into a new project as they are: the
monthly reports (a burst of one customer, then another's report runs
second), and the SaaS exports (turns per customer, two at once per
customer); workers then run them all."""

from ast import literal_eval

from .docs_blocks import code_blocks, readme_block
from .new_site import MARKS, Project

pytestmark = MARKS

# The ready jobs' first argument (the customer), in the order workers claim them.
CLAIM_ORDER = """
from steady_queue.models import Job, ReadyExecution
ids = ReadyExecution.objects.in_claim_order().values_list("job_id", flat=True)
jobs = Job.objects.in_bulk(list(ids))
print("=>", [jobs[pk].args[0] for pk in ids])
"""


def test_the_fairness_examples_run_as_pasted(tmp_path):
    reports, exports = [
        block for block in code_blocks("fairness.rst") if block.startswith("# ")
    ]
    assert reports.startswith("# reports/tasks.py\n")
    assert exports.startswith("# exports/tasks.py\n")
    project = Project.start(tmp_path / "site")
    project.manage("startapp", "reports")
    project.manage("startapp", "exports")
    project.configure(
        readme_block('"BACKEND": "steady_queue.backend.SteadyQueueBackend"'),
        project.installed_apps("reports", "exports"),
    )
    project.write("reports/tasks.py", reports)
    project.write("exports/tasks.py", exports)
    project.manage("migrate")

    # Eight years of tenant 7's reports, then tenant 8's one: second or third.
    order = project.shell(
        "from reports.tasks import monthly_report\n"
        "for n in range(96):\n"
        "    monthly_report.enqueue(7, f'month {n}')\n"
        "monthly_report.enqueue(8, '2026-10')\n" + CLAIM_ORDER
    )
    customers = literal_eval(order)
    assert len(customers) == 97
    assert customers.index(8) in (1, 2), customers[:5]

    # Five exports of customer 1, one of customer 2: two of 1's ready (the
    # cap), then 2's between them.
    order = project.shell(
        "from exports.tasks import run_export\n"
        "for n in range(5):\n"
        "    run_export.enqueue(1, n)\n"
        "run_export.enqueue(2, 0)\n" + CLAIM_ORDER
    )
    exports_ready = [c for c in literal_eval(order) if c in (1, 2)]
    assert exports_ready == [1, 2, 1], exports_ready

    # The workers run everything: the blocked exports as slots free up.
    ran = 0
    for _ in range(10):
        out = project.manage("steady_queue", "--once").stdout
        ran += int(out.split()[1])  # "Ran N job(s)."
        if ran == 97 + 6:
            break
    assert ran == 97 + 6, ran
