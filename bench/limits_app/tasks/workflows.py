"""No-op tasks with durable steps, a wait for an event and a durable sleep
(bench/workflows.py). A module of its own: the plain task in the package's
``__init__`` also runs on a baseline checkout without workflows."""

from django.tasks import task

from steady_queue import durable_sleep, step, wait_for_event


def nothing():
    return None


@task
def one_step():
    step("a", nothing)


@task
def three_steps():
    step("a", nothing)
    step("b", nothing)
    step("c", nothing)


@task
def waits_for(name):
    return wait_for_event(name)


@task
def sleeps(seconds):
    durable_sleep(seconds)
