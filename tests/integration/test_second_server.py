"""Past one database server: a backend alias whose jobs live on a second
PostgreSQL server (started here with initdb), each alias drained by its own
supervisor (docs/scaling.rst)."""

import pytest

from steady_queue.models import Job

from ..helpers import wait_for
from .private_postgres import PostgresServer
from .support import (
    enqueue_records,
    proc_stat,
    run_manage_py,
    runs_by_label,
    wait_for_boot,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

JOBS_PER_SERVER = 40


@pytest.fixture
def private_postgres():
    yield from PostgresServer.for_a_test()


def test_an_alias_on_a_second_server_is_drained_by_its_own_supervisor(
    private_postgres, start_supervisor, tmp_path
):
    path = tmp_path / "runs"
    environment = {"SQ_TEST_SECOND_SERVER_PORT": str(private_postgres.port)}
    run_manage_py("migrate", "--database", "second", "-v", "0", env=environment)
    run_manage_py(
        "shell",
        "-c",
        "from steady_queue import enqueue_many\n"
        "from tests import tasks\n"
        f"calls = [(({str(path)!r}, f'second-{{n}}'), {{}}) "
        f"for n in range({JOBS_PER_SERVER})]\n"
        "enqueue_many(tasks.record_run.using(backend='second'), calls)\n",
        env=environment,
    )
    enqueue_records(path, JOBS_PER_SERVER, prefix="default")

    second = start_supervisor("--backend", "second", env=environment)
    default = start_supervisor(env=environment)
    wait_for_boot(default)
    wait_for(
        lambda: len(runs_by_label(path)) == 2 * JOBS_PER_SERVER,
        timeout=60,
        message="every job of both servers ran",
    )
    assert set(runs_by_label(path).values()) == {1}
    # Which supervisor's process group ran each job, from the pid it wrote.
    groups = {}
    for line in path.read_text().splitlines():
        label, pid = line.split()[:2]
        stat = proc_stat(int(pid))
        groups.setdefault(label.split("-")[0], set()).add(stat and stat[2])
    assert groups == {"second": {second.pid}, "default": {default.pid}}
    # The default database holds none of the second server's jobs.
    assert not Job.objects.filter(backend_name="second").exists()
    print(
        f"second server: {JOBS_PER_SERVER} jobs on each of two PostgreSQL "
        f"servers (the second on port {private_postgres.port}), each drained "
        "by its own alias's supervisor"
    )
