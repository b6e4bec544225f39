"""A web process's work, run in its own process through the pooler.

``python -m tests.integration.pooled_client ACTION [ARGS]`` with the test's
environment (tests/integration/test_pgbouncer.py sets SQ_TEST_POOLER_PORT):
every query of this process goes through PgBouncer. Prints one JSON line.

- ``enqueue PATH COUNT``: COUNT record_run jobs one by one and COUNT through
  enqueue_many, a batch of COUNT members with a callback, a job scheduled a
  second ahead, and COUNT state machine rows; prints what it made.
- ``admin``: logs a superuser in and reads every steady_queue admin page;
  prints {url: status code}.
- ``route``: whether the pooled and the direct alias reach PostgreSQL
  itself, as prepared_statements="auto" judges, and whether an enqueue
  through the pooler turned prepared statements on.
"""

import json
import os
import sys
from datetime import timedelta


def enqueue(path, count):
    from django.utils import timezone

    import steady_queue
    from tests import tasks
    from tests.stator_app.models import Article

    single = [tasks.record_run.enqueue(path, f"single-{n}") for n in range(count)]
    calls = [((path, f"bulk-{n}"), {}) for n in range(count)]
    bulk = steady_queue.enqueue_many(tasks.record_run, calls)
    later = tasks.record_run.using(
        run_after=timezone.now() + timedelta(seconds=1)
    ).enqueue(path, "scheduled")
    with steady_queue.batch(on_finish=tasks.batch_callback) as opened:
        members = [((n,), {}) for n in range(count)]
        steady_queue.enqueue_many(tasks.batch_member, members)
    Article.objects.bulk_create([Article(title=f"row {n}") for n in range(count)])
    return {
        "jobs": [result.id for result in [*single, *bulk, later]],
        "batch": opened.id,
    }


def admin_pages():
    from django.contrib import admin
    from django.contrib.auth.models import User
    from django.test import Client
    from django.urls import reverse

    user, _ = User.objects.get_or_create(
        username="pooled-admin", defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client()
    client.force_login(user)
    urls = [reverse("admin:index")]
    for model in admin.site._registry:
        if model._meta.app_label == "steady_queue":
            name = f"admin:steady_queue_{model._meta.model_name}_changelist"
            urls.append(reverse(name))
    urls.append(reverse("admin:steady_queue_dashboard_changelist"))
    return {url: client.get(url, follow=True).status_code for url in urls}


def route():
    from django.db import connections

    from steady_queue.dialects import prepared
    from tests import tasks

    tasks.noop.enqueue()
    pooled = connections["default"]
    return {
        "default": prepared.reaches_the_server_itself(pooled),
        "direct": prepared.reaches_the_server_itself(connections["direct"]),
        "threshold": pooled.connection.prepare_threshold,
    }


def main(action, *args):
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    if action == "enqueue":
        found = enqueue(args[0], int(args[1]))
    elif action == "admin":
        found = admin_pages()
    elif action == "route":
        found = route()
    else:
        raise SystemExit(f"unknown action {action!r}: enqueue, admin or route")
    print(json.dumps(found))


if __name__ == "__main__":
    main(*sys.argv[1:])
