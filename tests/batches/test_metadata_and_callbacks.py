"""Batch metadata limits, the admin's summary of it, and retrying callbacks."""

import io

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

import steady_queue
from steady_queue.batches.block import METADATA_MAX_BYTES, METADATA_MAX_DEPTH
from steady_queue.exceptions import BatchError
from steady_queue.models import Batch, Job

from .. import tasks
from ..processes.test_burst import burst
from .test_batches import CALLBACK, callbacks_run

pytestmark = pytest.mark.django_db(transaction=True)


def nested(depth):
    """A dict nested ``depth`` deep (depth 1 is a flat dict)."""
    value = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"next": value}
    return value


def batch_count():
    return Batch.objects.count()


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        pytest.param(
            {"blob": "x" * METADATA_MAX_BYTES},
            r"over the limit of 65,536 \(64 KiB\)",
            id="size",
        ),
        pytest.param(
            nested(METADATA_MAX_DEPTH + 1), "more than 20 deep, the limit", id="depth"
        ),
        pytest.param(nested(30), "more than 20 deep, the limit", id="mariadb-depth"),
        pytest.param(nested(5000), "more than 20 deep, the limit", id="very-deep"),
    ],
)
def test_metadata_over_a_limit_is_refused_at_batch_naming_it(metadata, message):
    with pytest.raises(BatchError, match=message):
        with steady_queue.batch(on_finish=tasks.batch_callback, metadata=metadata):
            tasks.batch_member.enqueue(1)
    assert batch_count() == 0
    assert not Job.objects.exists()


def test_metadata_at_the_limits_reaches_the_callback_on_every_database():
    metadata = {"deep": nested(METADATA_MAX_DEPTH - 1), "blob": "y" * 60_000}
    with steady_queue.batch(on_finish=tasks.batch_callback, metadata=metadata):
        tasks.batch_member.enqueue(1)

    burst().start()
    burst().start()

    [run] = callbacks_run()
    assert run["metadata"] == metadata
    [callback] = Job.objects.filter(task_path=CALLBACK)
    assert callback.finished_at is not None and callback.return_value == run


def renamed_callback(batch_id):
    """As if the callback's task had been renamed after the batch opened."""
    batch = Batch.objects.get(pk=batch_id)
    good = batch.callbacks["finish"]
    Batch.objects.filter(pk=batch_id).update(
        callbacks={"finish": {**good, "task_path": "tests.tasks.renamed"}}
    )
    return good


def ended_with_a_failed_callback():
    with steady_queue.batch(on_finish=tasks.batch_callback) as opened:
        tasks.batch_member.enqueue(1)
    good = renamed_callback(opened.id)
    burst().start()
    assert Batch.objects.get(pk=opened.id).failed_callbacks() == ["finish"]
    return opened.id, good


def test_a_failed_callback_is_enqueued_again_by_the_command_once_fixed():
    batch_id, good = ended_with_a_failed_callback()
    out = io.StringIO()
    call_command("steady_queue", "retry-callbacks", "--batch", batch_id, stdout=out)
    assert "finish callback: still failing (TaskNotFoundError" in out.getvalue()

    Batch.objects.filter(pk=batch_id).update(callbacks={"finish": good})
    out = io.StringIO()
    call_command("steady_queue", "retry-callbacks", "--all", stdout=out)
    [callback] = Job.objects.filter(task_path=CALLBACK)
    assert f"finish callback: enqueued as job {callback.pk}." in out.getvalue()
    assert Batch.objects.get(pk=batch_id).callback_results == {
        "finish": str(callback.pk)
    }

    out = io.StringIO()
    call_command("steady_queue", "retry-callbacks", "--all", stdout=out)
    assert "Retried the failed callbacks of 0 batch(es)." in out.getvalue()
    assert Job.objects.filter(task_path=CALLBACK).count() == 1


def test_the_command_asks_which_batches():
    with pytest.raises(CommandError, match="--batch ID, repeatable"):
        call_command("steady_queue", "retry-callbacks")


def test_the_batch_page_retries_its_failed_callbacks(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", "", "pw"))
    batch_id, good = ended_with_a_failed_callback()
    page = reverse("admin:steady_queue_batch_change", args=[batch_id])
    retry = reverse("admin:steady_queue_batch_retry_callbacks", args=[batch_id])
    assert 'id="sq-retry-callbacks"' in client.get(page).content.decode()
    assert client.get(retry).status_code == 405

    Batch.objects.filter(pk=batch_id).update(callbacks={"finish": good})
    response = client.post(retry, follow=True)

    [callback] = Job.objects.filter(task_path=CALLBACK)
    assert f"was enqueued as job {callback.pk}" in response.content.decode()
    assert 'id="sq-retry-callbacks"' not in client.get(page).content.decode()


def test_a_viewer_cannot_retry_callbacks(client):
    from ..admin.conftest import VIEW, staff_with

    client.force_login(staff_with(*VIEW, "view_batch"))
    batch_id, _ = ended_with_a_failed_callback()
    page = reverse("admin:steady_queue_batch_change", args=[batch_id])
    retry = reverse("admin:steady_queue_batch_retry_callbacks", args=[batch_id])
    assert 'id="sq-retry-callbacks"' not in client.get(page).content.decode()
    assert client.post(retry).status_code == 403


def test_the_batch_list_summarises_big_metadata_and_the_page_shows_it_all(client):
    from django.contrib.auth.models import User

    client.force_login(User.objects.create_superuser("root", "", "pw"))
    # "a" sorts first on every database (jsonb orders keys by length).
    metadata = {"a": "nightly", "rows": ["z" * 100] * 600}
    ids = []
    for _ in range(5):
        with steady_queue.batch(metadata=metadata) as opened:
            tasks.batch_member.enqueue(1)
        ids.append(opened.id)

    listed = client.get(reverse("admin:steady_queue_batch_changelist"))
    assert listed.status_code == 200
    # Five batches of 60 KB each: the list carries a summary of each.
    assert len(listed.content) < 60_000, len(listed.content)
    assert "a=nightly" in listed.content.decode()
    shown = client.get(reverse("admin:steady_queue_batch_change", args=[ids[0]]))
    assert shown.content.decode().count("z" * 100) == 600
