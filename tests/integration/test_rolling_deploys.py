"""Rolling deploys: two checkouts of the code, run side by side on one database.

The older checkout is extracted from this repository's git history by the test
(``git archive``) and its supervisor runs from those files; the newer one is
the tree. Every process records its code version (STEADY_QUEUE_CODE_VERSION
here). docs/deployment.rst, "Rolling deploys", says what these show.
"""

import io
import os
import signal
import subprocess
import sys
import tarfile
from datetime import datetime

import pytest
from django.db import connection, transaction

from steady_queue.compat import TaskResultStatus
from steady_queue.models import FailedExecution, Job, Process

from .. import deploy_tasks, tasks
from ..conftest import ROOT
from ..helpers import scaled, wait_for
from .support import runs_by_label, status_of, wait_for_exit

pytestmark = [
    pytest.mark.integration,
    pytest.mark.newest_django,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not (ROOT / ".git").exists(), reason="needs a git checkout to extract from"
    ),
]

OLD, NEW = "v1", "v2"
# The task only the newer release has: deleted from the older checkout.
NEW_TASK_MODULE = "tests/deploy_tasks.py"
# The model field this feature added: the release before it is the parent of
# the first commit that wrote it (found by content, whatever the migration's
# number once merged).
FEATURE_MARK = ("code_version = models.CharField", "steady_queue/models/process.py")


def git(*args):
    done = subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, check=True, timeout=120
    )
    return done.stdout


def extract(commit, destination):
    """The files of ``commit``, written under ``destination``; return it."""
    archive = git("archive", "--format=tar", commit, "steady_queue", "tests")
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(destination, filter="data")
    return destination


def release_before_versions():
    """The last commit whose processes record no code version."""
    text, path = FEATURE_MARK
    added = git("log", "--format=%H", "-S", text, "--", path).split()
    if not added:
        pytest.skip("this checkout has no git history of the code_version column")
    return f"{added[-1].decode()}^"


# The older release's tests/deploy_tasks.py: a task the newer one dropped,
# and not the task the newer one added.
OLD_TASK_MODULE_TEXT = """\
import os

from steady_queue.compat import task


@task
def dropped_in_the_new_release(path, label):
    with open(path, "a") as file:
        file.write(f"{label} {os.environ.get('STEADY_QUEUE_CODE_VERSION')}\\n")
    return label
"""


@pytest.fixture
def older_release(tmp_path):
    """HEAD's files, with a task the tree dropped and without the one it
    added: a release before both changes."""
    root = extract("HEAD", tmp_path / "older")
    (root / NEW_TASK_MODULE).write_text(OLD_TASK_MODULE_TEXT)
    return root


def enqueue_with(root, code, *args):
    """Run ``code`` (Python, with django set up) in the checkout at ``root``."""
    subprocess.run(
        [sys.executable, "-c", f"import django, sys; django.setup(); {code}", *args],
        cwd=root,
        env={
            **os.environ,
            "SQ_TEST_DATABASE_NAME": connection.settings_dict["NAME"],
            "PYTHONPATH": str(root),
            "DJANGO_SETTINGS_MODULE": "tests.settings",
        },
        check=True,
        timeout=scaled(60),
    )


def environment(version, **more):
    return {
        "STEADY_QUEUE_CODE_VERSION": version,
        "SQ_TEST_HANDBACK_GRACE": "600",
        "SQ_TEST_HANDBACK_DELAY": "0.3",
        **more,
    }


def live_versions():
    return sorted(
        Process.objects.filter(kind="worker").values_list("code_version", flat=True)
    )


def wait_for_versions(*versions):
    wait_for(
        lambda: live_versions() == sorted(versions),
        timeout=30,
        message=f"workers of versions {versions} registered",
    )


def stop(supervisor):
    supervisor.signal(signal.SIGTERM)
    assert wait_for_exit(supervisor) == 0, supervisor.log()


def health(*args):
    return subprocess.run(
        [
            sys.executable,
            str(ROOT / "tests" / "manage.py"),
            "steady_queue",
            "health",
            "--anywhere",
            *args,
        ],
        env={
            **os.environ,
            "SQ_TEST_DATABASE_NAME": connection.settings_dict["NAME"],
            "PYTHONPATH": str(ROOT),
        },
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )


def test_a_task_only_the_new_release_has_waits_for_it_and_never_fails(
    start_supervisor, older_release, tmp_path
):
    ran = tmp_path / "ran.txt"
    old = start_supervisor(env=environment(OLD), root=older_release)
    wait_for_versions(OLD)

    # New web code enqueues before any new worker runs: the old ones hand
    # the jobs back, held (a new release's workers are expected) and not
    # claimed again meanwhile.
    early = [
        deploy_tasks.new_in_this_release.enqueue(str(ran), f"early-{n}")
        for n in range(4)
    ]
    wait_for(
        lambda: (
            Job.objects.filter(handbacks__held_until__isnull=False).count()
            == len(early)
        ),
        timeout=30,
        message="the old workers handed every job back, held",
    )
    assert not ran.exists()

    new = start_supervisor(env=environment(NEW))
    wait_for_versions(OLD, NEW)
    during = [
        deploy_tasks.new_in_this_release.enqueue(str(ran), f"during-{n}")
        for n in range(12)
    ]
    results = early + during
    wait_for(
        lambda: all(status_of(r) == TaskResultStatus.SUCCESSFUL for r in results),
        timeout=60,
        message="every job of the new task ran",
    )

    assert FailedExecution.objects.count() == 0
    runs = runs_by_label(ran)
    assert runs == {f"{r.args[1]}": 1 for r in results}
    assert {line.split()[1] for line in ran.read_text().splitlines()} == {NEW}
    for job in Job.objects.filter(pk__in=[r.id for r in early]):
        assert job.handbacks["versions"] == [OLD]
        # A handback counts no attempt: the one run is the only one named.
        assert len(job.worker_ids) == 1
        assert job.errors == []
    stop(old)
    stop(new)


def test_a_task_the_new_release_dropped_runs_on_an_old_worker(
    start_supervisor, older_release, tmp_path
):
    ran = tmp_path / "ran.txt"
    new = start_supervisor(env=environment(NEW))
    wait_for_versions(NEW)

    # Old web code, still serving, enqueues a task the new release dropped,
    # while only new workers run (the old ones were stopped a little early).
    enqueue_with(
        older_release,
        "from tests import deploy_tasks; "
        "[deploy_tasks.dropped_in_the_new_release.enqueue(sys.argv[1], f'old-{n}')"
        " for n in range(12)]",
        str(ran),
    )
    wait_for(
        lambda: Job.objects.filter(handbacks__count__gte=1).count() == 12,
        timeout=30,
        message="the new workers handed every job back",
    )
    # Within the grace, an old worker comes back (a rollback, say).
    old = start_supervisor(env=environment(OLD), root=older_release)
    wait_for(
        lambda: Job.objects.finished().count() == 12,
        timeout=60,
        message="every job of the dropped task ran",
    )

    assert FailedExecution.objects.count() == 0
    assert set(runs_by_label(ran).values()) == {1} and len(runs_by_label(ran)) == 12
    assert {line.split()[1] for line in ran.read_text().splitlines()} == {OLD}
    assert all(job.handbacks["versions"] == [NEW] for job in Job.objects.all())
    stop(old)
    stop(new)


def test_a_task_no_live_version_has_fails_after_the_grace(
    start_supervisor, older_release
):
    grace = 3.0
    env = {"SQ_TEST_HANDBACK_GRACE": str(grace)}
    old = start_supervisor(env=environment(OLD, **env), root=older_release)
    new = start_supervisor(env=environment(NEW, **env))
    wait_for_versions(OLD, NEW)

    # Old web code enqueued a task the new release removed, and the old
    # release lost it too (say, renamed twice): no version can load it.
    # One transaction: no worker sees the job before its path is changed.
    with transaction.atomic():
        result = tasks.noop.enqueue()
        job = Job.objects.filter(pk=result.id)
        job.update(task_path="tests.deploy_tasks.removed")

    wait_for(
        lambda: FailedExecution.objects.filter(job_id=result.id).exists(),
        timeout=30,
        message="the job no version can load failed",
    )
    job = Job.objects.get(pk=result.id)
    assert job.handbacks["versions"] == [OLD, NEW]
    assert job.handbacks["count"] >= 2
    failed_after = job.finished_at - job.enqueued_at
    assert failed_after.total_seconds() >= grace
    error = job.errors[-1]
    assert error["exception_class_path"] == "steady_queue.exceptions.TaskNotFoundError"
    assert "No live code version could load the task" in error["traceback"]
    assert "tried by 'v1', 'v2'" in error["traceback"]
    # Only the run that failed it counts as an attempt.
    assert len(job.worker_ids) == 1
    stop(old)
    stop(new)


def test_health_require_version_waits_for_every_process_to_run_it(
    start_supervisor, older_release
):
    old = start_supervisor(env=environment(OLD), root=older_release)
    new = start_supervisor(env=environment(NEW))
    wait_for_versions(OLD, NEW)

    mixed = health("--require-version", NEW)
    assert mixed.returncode == 1, mixed.stdout + mixed.stderr
    assert "FAIL version:" in mixed.stdout
    assert "runs 'v1'" in mixed.stdout and "runs 'v2'" not in mixed.stdout

    # A deploy waits: the old release stops meanwhile, and the wait ends.
    waiting = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "tests" / "manage.py"),
            "steady_queue",
            "health",
            "--anywhere",
            "--require-version",
            NEW,
            "--wait",
            str(int(scaled(60))),
        ],
        env={
            **os.environ,
            "SQ_TEST_DATABASE_NAME": connection.settings_dict["NAME"],
            "PYTHONPATH": str(ROOT),
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    stop(old)
    output, _ = waiting.communicate(timeout=scaled(90))
    assert waiting.returncode == 0, output
    assert "ok   version: all" in output

    never = health("--require-version", "v3", "--wait", "1")
    assert never.returncode == 1, never.stdout + never.stderr
    assert "not on 'v3'" in never.stdout
    stop(new)


def test_the_previous_release_runs_on_through_this_releases_migrations(
    start_supervisor, tmp_path
):
    """Expand, then contract: the release before this one keeps working on a
    database migrated to the tree's migrations, beside this release."""
    previous = extract(release_before_versions(), tmp_path / "previous")
    ran = tmp_path / "ran.txt"
    old = start_supervisor(root=previous)
    wait_for_versions("")
    new = start_supervisor(env=environment(NEW))
    wait_for_versions("", NEW)

    # The previous release enqueues (its rows name no new column) ...
    enqueue_with(
        previous,
        "from tests import tasks; "
        "[tasks.record_run.enqueue(sys.argv[1], f'old-{n}') for n in range(10)]",
        str(ran),
    )
    # ... and so does this one; both releases' workers run both.
    results = [tasks.record_run.enqueue(str(ran), f"new-{n}") for n in range(10)]
    wait_for(
        lambda: Job.objects.finished().count() == 20,
        timeout=60,
        message="every job of both releases ran",
    )
    assert FailedExecution.objects.count() == 0
    assert all(status_of(r) == TaskResultStatus.SUCCESSFUL for r in results)
    assert set(runs_by_label(ran).values()) == {1}
    assert len(runs_by_label(ran)) == 20
    # The previous release's rows read the database's default.
    assert Job.objects.filter(handbacks__isnull=False).count() == 0
    assert "" in set(Process.objects.values_list("code_version", flat=True))

    mixed = health("--require-version", NEW)
    assert "an unrecorded version (an older release)" in mixed.stdout
    stop(old)
    stop(new)


def test_the_documented_deploy_steps_lose_nothing_and_steer_handbacks(
    start_supervisor, older_release, tmp_path
):
    """docs/deployment.rst's order of steps, with both webs enqueuing: every
    job runs once, on a version that has it, and none waits long for it."""
    ran = tmp_path / "ran.txt"
    delay = 0.3
    old = start_supervisor(env=environment(OLD), root=older_release)
    wait_for_versions(OLD)

    # Step 2: the new release's supervisors start beside the old ones; both
    # releases' web code enqueues, each the task the other lacks.
    new = start_supervisor(env=environment(NEW))
    wait_for_versions(OLD, NEW)
    for round in range(3):
        enqueue_with(
            older_release,
            "from tests import deploy_tasks, tasks; r = sys.argv[2]; "
            "[deploy_tasks.dropped_in_the_new_release.enqueue(sys.argv[1], "
            "f'old-{r}-{n}') for n in range(8)]; "
            "[tasks.record_run.enqueue(sys.argv[1], f'plain-old-{r}-{n}') "
            "for n in range(4)]",
            str(ran),
            str(round),
        )
        for n in range(8):
            deploy_tasks.new_in_this_release.enqueue(str(ran), f"new-{round}-{n}")
            tasks.record_run.enqueue(str(ran), f"plain-new-{round}-{n}")

    # Step 3: the old release may stop once nothing only it can run is queued.
    handover = health("--require-version", NEW, "--handover", "--wait", "60")
    assert handover.returncode == 0, handover.stdout + handover.stderr
    departed = "ok   departing: no queued or running job needs another version"
    assert departed in handover.stdout
    # Step 4: stop it; step 5: every live process runs the new release.
    stop(old)
    done = health("--require-version", NEW, "--wait", "30")
    assert done.returncode == 0, done.stdout + done.stderr

    wait_for(
        lambda: Job.objects.finished().count() == Job.objects.count(),
        timeout=60,
        message="every job ran",
    )
    assert FailedExecution.objects.count() == 0
    runs = runs_by_label(ran)
    assert len(runs) == Job.objects.count() == 3 * (8 + 4 + 16)
    assert set(runs.values()) == {1}
    versions = {
        line.split()[0]: line.split()[1]
        for line in ran.read_text().split("\n")
        if line.startswith(("old-", "new-"))
    }
    assert {v for label, v in versions.items() if label.startswith("old-")} == {OLD}
    assert {v for label, v in versions.items() if label.startswith("new-")} == {NEW}
    # Handed-back jobs start soon after their first handback: left to the
    # version that has not tried them, not claimed again by their own.
    waits = sorted(
        (
            job.started_at - datetime.fromisoformat(job.handbacks["since"])
        ).total_seconds()
        for job in Job.objects.filter(handbacks__isnull=False)
    )
    assert waits
    p95 = waits[int(0.95 * (len(waits) - 1))]
    print(f"{len(waits)} handed back; start after first handback p95 {p95:.2f} s")
    assert p95 <= delay + scaled(2), waits
    stop(new)
