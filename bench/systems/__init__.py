"""The systems under test, each described by a System adapter."""

from systems.django_tasks_db import DjangoTasksDb
from systems.oban import Oban
from systems.pgqueuer import Pgqueuer
from systems.procrastinate import Procrastinate
from systems.steady_queue import SteadyQueue
from systems.steady_queue_pypi import SteadyQueuePypi

SYSTEMS = {
    system.key: system
    for system in [
        SteadyQueue(),
        Pgqueuer(),
        Oban(),
        DjangoTasksDb(),
        Procrastinate(),
        SteadyQueuePypi(),
    ]
}
