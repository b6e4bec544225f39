"""manage.py demo: enqueue the shop's example tasks, wait for them, report.

scripts/demo (``make demo``) runs ``demo enqueue``, starts ``manage.py
steady_queue``, runs ``demo wait``, stops the supervisor and runs ``demo report``.
The three steps share a small JSON manifest of what was enqueued: the tasks,
and the restock batch with what its callbacks should do.
"""

import json
import os
import tempfile
import time
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import steady_queue
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone
from django.utils.module_loading import import_string
from steady_queue.models import Job

from shop import tasks
from shop.models import Charge, Order, Shipment

try:
    from django.tasks import TaskResultStatus
    from django.tasks.exceptions import TaskResultDoesNotExist
except ImportError:  # Django 5.2 with the django-tasks backport
    from django_tasks import TaskResultStatus
    from django_tasks.exceptions import TaskResultDoesNotExist

REMINDER_DELAY = 5  # seconds; long enough to see the dispatcher at work
# The (pretend) payment provider confirms the workflow's payment this late:
# until then charge_order waits, parked, holding no worker.
CONFIRMATION_DELAY = 2  # seconds

# The restock batch: one restock_item job per product. The supplier has
# discontinued the last one (shop/tasks.py), so that job fails and the batch
# ends "failed": on_finish and on_failure are enqueued, on_success is not.
RESTOCK = [
    ("Cast-iron teapot", 6),
    ("Loose-leaf sampler", 24),
    ("Tea towel", 12),
    ("Bone-china cup", 10),
]
CALLBACKS = {
    "finish": ("on_finish", tasks.summarize_restock),
    "success": ("on_success", tasks.announce_restock),
    "failure": ("on_failure", tasks.alert_purchasing),
}


class RolledBack(Exception):
    """Raised on purpose to roll a transaction back."""


class Command(BaseCommand):
    help = "Enqueue the example tasks, wait for them to finish, or report on them."

    def add_arguments(self, parser):
        parser.add_argument(
            "action", choices=["enqueue", "wait", "report"], help="The step to run."
        )
        parser.add_argument(
            "--manifest",
            default=str(Path(tempfile.gettempdir()) / "steady_queue_demo.json"),
            help="Where the enqueued result ids are kept between steps.",
        )
        parser.add_argument(
            "--timeout", type=float, default=60, help="wait: give up after this long."
        )
        parser.add_argument(
            "--supervisor-pid",
            type=int,
            help="wait: stop waiting if this process (the supervisor) exits.",
        )

    def handle(self, *args, action, manifest, **options):
        manifest = Path(manifest)
        if action == "enqueue":
            self.enqueue(manifest)
        elif action == "wait":
            manifest = self.read(manifest)
            self.wait(manifest, options["timeout"], options["supervisor_pid"])
        else:
            self.report(self.read(manifest))

    # --- enqueue -----------------------------------------------------------

    def enqueue(self, manifest):
        orders = [
            Order.objects.create(
                customer_email=email, item=item, amount=Decimal(amount)
            )
            for email, item, amount in [
                ("ada@example.com", "Cast-iron teapot", "42.00"),
                ("grace@example.com", "Loose-leaf sampler", "18.50"),
                ("linus@example.com", "Tea towel", "7.25"),
            ]
        ]
        first, second, third = orders
        # Each order's parcel: a state machine the supervisor's state runner
        # moves from packing to delivered (shop/models.py).
        Shipment.objects.bulk_create([Shipment(order=order) for order in orders])
        entries = []

        def add(result, call, expect=TaskResultStatus.SUCCESSFUL, note=""):
            entries.append(
                {
                    "id": result.id,
                    "task": result.task.module_path,
                    "call": call,
                    "queue": result.task.queue_name,
                    "priority": result.task.priority,
                    "expect": expect,
                    "note": note,
                }
            )

        # 1. Enqueue inside the transaction that creates the data it needs.
        with transaction.atomic():
            result = tasks.send_order_confirmation.enqueue(first.pk)
            first.confirmation_task_id = result.id
            first.save(update_fields=["confirmation_task_id"])
        add(result, f"send_order_confirmation({first.pk})", note="in atomic()")

        # 2. Many calls of one task in a few INSERTs.
        for order, result in zip(
            (second, third),
            steady_queue.enqueue_many(
                tasks.send_order_confirmation,
                [((order.pk,), {}) for order in (second, third)],
            ),
            strict=True,
        ):
            add(result, f"send_order_confirmation({order.pk})", note="enqueue_many")

        # 3. A report that returns a dict; low priority on the reports queue.
        #    It is @unique: asking again while it waits merges into the first.
        report = tasks.build_sales_report.enqueue()
        if tasks.build_sales_report.enqueue().id != report.id:
            raise CommandError("A second @unique report was enqueued.")
        add(report, "build_sales_report()", note="@unique: 2nd call merged")

        # 4. An async task.
        add(tasks.fetch_exchange_rate.enqueue("EUR"), "fetch_exchange_rate('EUR')")

        # 5. A task that raises, retried once, then failed for good.
        add(
            tasks.charge_card.enqueue(third.pk),
            f"charge_card({third.pk})",
            expect=TaskResultStatus.FAILED,
            note="fails on purpose, @retry",
        )
        add(
            tasks.fetch_supplier_quote.enqueue("Tea towel"),
            "fetch_supplier_quote('Tea towel')",
            expect=TaskResultStatus.FAILED,
            note="@timeout(1)",
        )

        # 6. Deferred: not ready before run_after.
        run_after = timezone.now() + timedelta(seconds=REMINDER_DELAY)
        add(
            tasks.send_review_reminder.using(run_after=run_after).enqueue(first.pk),
            f"send_review_reminder({first.pk})",
            note=f"run_after +{REMINDER_DELAY}s",
        )

        # 7. High priority on a queue with its own worker.
        add(
            tasks.alert_fraud_team.enqueue(second.pk, "new card, large order"),
            f"alert_fraud_team({second.pk}, ...)",
            note="urgent queue",
        )

        # 8. A concurrency limit: the second sync for one customer is blocked
        #    until the first finishes, then runs.
        for attempt in ("first", "second"):
            add(
                tasks.sync_loyalty_points.enqueue(first.customer_email),
                f"sync_loyalty_points({first.customer_email!r})",
                note=f"limit 1 per customer, {attempt}",
            )

        # 9. A batch: the restock jobs are enqueued together, in one
        #    transaction, and once every one has ended the batch enqueues its
        #    callbacks: on_finish always, then on_success or on_failure. The
        #    supplier's API is rate limited: two restocks start at once, the
        #    other two wait for the next second.
        with steady_queue.batch(
            on_finish=tasks.summarize_restock,
            on_success=tasks.announce_restock,
            on_failure=tasks.alert_purchasing,
            metadata={"reason": "weekly restock"},
        ) as restock:
            results = steady_queue.enqueue_many(
                tasks.restock_item,
                [((item, quantity), {}) for item, quantity in RESTOCK],
            )
        for (item, quantity), result in zip(RESTOCK, results, strict=True):
            if item in tasks.DISCONTINUED:
                expect, note = TaskResultStatus.FAILED, ", fails on purpose"
            else:
                expect, note = TaskResultStatus.SUCCESSFUL, ""
            add(
                result,
                f"restock_item({item!r}, {quantity})",
                expect=expect,
                note=f"batch {restock.id}, {tasks.SUPPLIER_RATE}/s{note}",
            )
        failing = sum(item in tasks.DISCONTINUED for item, _ in RESTOCK)
        batch = {
            "id": restock.id,
            "expect": {
                "state": "failed" if failing else "succeeded",
                "size": len(RESTOCK),
                "finished": len(RESTOCK) - failing,
                "failed": failing,
                "discarded": 0,
                "callbacks": ["finish", "failure" if failing else "success"],
            },
        }

        # 10. A workflow: charge and reserve side by side, ship once both
        #     succeeded. charge_order charges in a durable step, then waits
        #     for the provider's "payment confirmed" event, which
        #     confirm_payment emits (standing in for the webhook view) a
        #     little later: charge_order then runs again, and its step
        #     returns the stored charge instead of charging twice.
        charge = tasks.charge_order.enqueue(second.pk)
        reserve = tasks.reserve_stock.enqueue(second.pk)
        with steady_queue.depends_on(charge, reserve):
            ship = tasks.ship_order.enqueue(second.pk)
        confirm_at = timezone.now() + timedelta(seconds=CONFIRMATION_DELAY)
        confirm = tasks.confirm_payment.using(run_after=confirm_at).enqueue(second.pk)
        add(charge, f"charge_order({second.pk})", note="step, waits for an event")
        add(reserve, f"reserve_stock({second.pk})", note="beside charge_order")
        add(ship, f"ship_order({second.pk})", note="depends_on charge, reserve")
        add(
            confirm,
            f"confirm_payment({second.pk})",
            note=f"emits the event, +{CONFIRMATION_DELAY}s",
        )
        workflow = {
            "order": second.pk,
            "charge": charge.id,
            "reserve": reserve.id,
            "ship": ship.id,
        }

        # 11. Enqueue inside a transaction that rolls back: no job is left.
        try:
            with transaction.atomic():
                doomed = tasks.send_order_confirmation.enqueue(first.pk)
                raise RolledBack
        except RolledBack:
            pass
        try:
            tasks.send_order_confirmation.get_result(doomed.id)
            rolled_back = False
        except TaskResultDoesNotExist:
            rolled_back = True

        manifest.parent.mkdir(parents=True, exist_ok=True)
        manifest.write_text(
            json.dumps(
                {"tasks": entries, "batch": batch, "workflow": workflow}, indent=2
            )
        )

        self.stdout.write(
            f"Created {len(orders)} orders and enqueued {len(entries)} tasks, "
            f"{len(RESTOCK)} of them as batch {restock.id} "
            f"(database: {settings.DATABASES['default']['ENGINE'].rsplit('.', 1)[-1]})."
        )
        width = max(len(entry["call"]) for entry in entries)
        for entry in entries:
            note = f"  ({entry['note']})" if entry["note"] else ""
            self.stdout.write(
                f"  result {entry['id']:>3}  {entry['call']:<{width}} "
                f"queue {entry['queue']:<8} priority {entry['priority']:>3}{note}"
            )
        if not rolled_back:
            raise CommandError("A job enqueued in a rolled-back transaction survived.")
        self.stdout.write(
            "One more confirmation was enqueued inside a transaction that rolled "
            "back:\nits job went with it (get_result() raises TaskResultDoesNotExist)."
        )

    # --- wait --------------------------------------------------------------

    def wait(self, manifest, timeout, supervisor_pid):
        entries = manifest["tasks"]
        deadline = time.monotonic() + timeout
        started = time.monotonic()
        last = None
        while True:
            results = [self.result(entry) for entry in entries]
            finished = sum(result.is_finished for result in results)
            delivered = Shipment.objects.filter(state="delivered").count()
            shipments = Shipment.objects.count()
            batch, batch_done = self.batch_progress(manifest["batch"]["id"])
            if (finished, delivered, batch) != last:
                self.stdout.write(
                    f"  {time.monotonic() - started:5.1f}s  "
                    f"{finished} of {len(entries)} tasks finished, "
                    f"{delivered} of {shipments} shipments delivered, {batch}"
                )
                last = finished, delivered, batch
            if finished == len(entries) and delivered == shipments and batch_done:
                return
            if supervisor_pid and not _is_running(supervisor_pid):
                raise CommandError("The supervisor exited before every task finished.")
            if time.monotonic() >= deadline:
                raise CommandError(
                    f"Gave up after {timeout:g}s with {len(entries) - finished} "
                    f"task(s) unfinished ({batch})."
                )
            time.sleep(0.25)

    def batch_progress(self, batch_id):
        """A line on the batch, and whether it ended and its callbacks ran."""
        status = steady_queue.get_batch(batch_id)
        ended = status.size - status.pending
        if not status.ended:
            return (
                f"batch {batch_id} {status.state} ({ended} of {status.size} ended)",
                False,
            )
        callbacks = [self.callback(status, event) for event in status.callback_results]
        ran = sum(result is not None and result.is_finished for result in callbacks)
        return (
            f"batch {batch_id} {status.state}, {ran} of {len(callbacks)} callbacks run",
            ran == len(callbacks),
        )

    # --- report ------------------------------------------------------------

    def report(self, manifest):
        entries = manifest["tasks"]
        rows = []
        unexpected = []
        for entry in entries:
            result = self.result(entry)
            if result.status == TaskResultStatus.SUCCESSFUL:
                outcome = json.dumps(result.return_value)
            elif result.status == TaskResultStatus.FAILED and result.errors:
                outcome = result.errors[-1].traceback.strip().splitlines()[-1]
            else:
                outcome = "-"
            ok = result.status == entry["expect"]
            if not ok:
                unexpected.append(entry)
            rows.append(
                [
                    entry["id"],
                    entry["call"],
                    entry["queue"],
                    str(entry["priority"]),
                    result.status + ("" if ok else " (!)"),
                    str(result.attempts),
                    _shorten(outcome, 56),
                ]
            )
        header = ["id", "task", "queue", "prio", "status", "tries", "result / error"]
        widths = [max(len(row[i]) for row in [header, *rows]) for i in range(7)]
        right = {0, 3, 5}

        def line(cells):
            return "  ".join(
                cell.rjust(width) if i in right else cell.ljust(width)
                for i, (cell, width) in enumerate(zip(cells, widths, strict=True))
            ).rstrip()

        self.stdout.write(line(header))
        self.stdout.write(line(["-" * width for width in widths]))
        for row in rows:
            self.stdout.write(line(row))
        self.stdout.write("")
        shipments = list(Shipment.objects.order_by("order_id"))
        self.stdout.write(
            "Shipments (a state machine: packing, in transit, delivered):"
        )
        for shipment in shipments:
            self.stdout.write(
                f"  order {shipment.order_id}  {shipment.state:<10} "
                f"tracking {shipment.tracking_number or '-'}"
            )
        self.stdout.write("")
        batch_problems = self.report_batch(manifest["batch"])
        self.stdout.write("")
        rate_problems = self.report_rate(entries)
        self.stdout.write("")
        workflow_problems = self.report_workflow(manifest["workflow"])
        self.stdout.write("")
        undelivered = [s for s in shipments if s.state != "delivered"]
        if undelivered:
            raise CommandError(f"{len(undelivered)} shipment(s) not delivered.")
        for entry in unexpected:
            self.stderr.write(
                f"result {entry['id']} ({entry['call']}) should be {entry['expect']}."
            )
        for problem in batch_problems:
            self.stderr.write(problem)
        if unexpected:
            raise CommandError(f"{len(unexpected)} task(s) did not end as expected.")
        if batch_problems:
            raise CommandError(
                f"Batch {manifest['batch']['id']} did not end as expected."
            )
        for problem in rate_problems:
            self.stderr.write(problem)
        if rate_problems:
            raise CommandError("A rate limit did not hold.")
        for problem in workflow_problems:
            self.stderr.write(problem)
        if workflow_problems:
            raise CommandError("The order workflow did not run as expected.")
        failed = sum(entry["expect"] == TaskResultStatus.FAILED for entry in entries)
        batch = manifest["batch"]
        called = [CALLBACKS[event][0] for event in batch["expect"]["callbacks"]]
        not_called = [
            option for event, (option, _) in CALLBACKS.items() if option not in called
        ]
        self.stdout.write(
            self.style.SUCCESS(
                f"All {len(entries)} tasks ended as expected: "
                f"{len(entries) - failed} SUCCESSFUL, {failed} FAILED on purpose.\n"
                f"Batch {batch['id']} ended {batch['expect']['state']} as expected: "
                f"{' and '.join(called)} ran once each, {' and '.join(not_called)} "
                "never."
            )
        )

    def report_rate(self, entries):
        """Print when each rate-limited restock started; return what was
        unexpected (more starts in a second than the supplier takes)."""
        path = tasks.restock_item.module_path
        starts = sorted(
            self.result(entry).started_at for entry in entries if entry["task"] == path
        )
        if not starts or None in starts:
            return ["restock_item: a job has no start time."]
        offsets = [(start - starts[0]).total_seconds() for start in starts]
        self.stdout.write(
            f"Rate limit: restock_item may start {tasks.SUPPLIER_RATE} times a "
            "second; its jobs started at "
            + ", ".join(f"+{offset:.2f} s" for offset in offsets)
        )
        most = max(
            sum(1 for other in offsets if start <= other < start + 1)
            for start in offsets
        )
        if most > tasks.SUPPLIER_RATE:
            return [f"restock_item started {most} times within one second."]
        return []

    def report_workflow(self, workflow):
        """Print how the order workflow ran; return what was unexpected (a
        second charge, or a shipment that started before its dependencies
        ended)."""
        order = workflow["order"]
        charge = tasks.charge_order.get_result(workflow["charge"])
        reserve = tasks.reserve_stock.get_result(workflow["reserve"])
        ship = tasks.ship_order.get_result(workflow["ship"])
        charges = Charge.objects.filter(order_id=order).count()
        self.stdout.write(f"Workflow (order {order}, docs/workflows.rst):")
        times = {1: "once"}.get(charges, f"{charges} times")
        self.stdout.write(
            f"  charge_order   {charge.status}: the card was charged {times}, "
            "though the job ran again once the payment was confirmed"
        )
        self.stdout.write(f"  reserve_stock  {reserve.status}, beside it")
        problems = []
        if charges != 1:
            problems.append(
                f"workflow: the card was charged {charges} times, not once."
            )
        ended = [result.finished_at for result in (charge, reserve)]
        if None in ended or ship.started_at is None:
            problems.append("workflow: a job of the workflow has not run.")
            return problems
        waited = (ship.started_at - max(ended)).total_seconds()
        self.stdout.write(
            f"  ship_order     {ship.status}: started {waited:.2f} s after the "
            f"later of the two ended, read {json.dumps(ship.return_value)}"
        )
        if waited < 0:
            problems.append("workflow: ship_order started before its dependencies.")
        return problems

    def report_batch(self, expected):
        """Print the batch's outcome and its callbacks; return what was unexpected."""
        status = steady_queue.get_batch(expected["id"])
        want = expected["expect"]
        self.stdout.write(
            f"Batch {status.id} (metadata {json.dumps(status.metadata)}), read back "
            f"with steady_queue.get_batch({status.id}):"
        )
        self.stdout.write(
            f"  state {status.state}: {status.size} jobs, {status.finished} finished, "
            f"{status.failed} failed, {status.discarded} discarded"
        )
        got = {
            "state": str(status.state),
            "size": status.size,
            "finished": status.finished,
            "failed": status.failed,
            "discarded": status.discarded,
        }
        problems = [
            f"batch {status.id}: {name} is {value}, not {want[name]}."
            for name, value in got.items()
            if value != want[name]
        ]
        rows = [["callback", "task", "enqueued", "id", "status", "result"]]
        for event, (option, task) in CALLBACKS.items():
            # This callback's jobs for this batch, counted in the job table:
            # one for each event the batch's end called for, none for the other.
            enqueued = Job.objects.filter(
                task_path=task.module_path, arguments__kwargs__batch__id=status.id
            ).count()
            expected_count = 1 if event in want["callbacks"] else 0
            if enqueued != expected_count:
                problems.append(
                    f"batch {status.id}: {option} was enqueued {enqueued} time(s), "
                    f"not {expected_count}."
                )
            times = {0: "never", 1: "once"}.get(enqueued, f"{enqueued} times")
            if event not in status.callback_results:
                rows.append([option, task.name, times, "-", "-", "-"])
                continue
            result = self.callback(status, event)
            if result is None:  # it could not be enqueued: the error is recorded
                problems.append(f"batch {status.id}: {option} was not enqueued.")
                outcome = status.callback_results[event]
                rows.append([option, task.name, times, "-", "-", outcome])
                continue
            if result.status == TaskResultStatus.SUCCESSFUL:
                outcome = json.dumps(result.return_value)
            else:
                outcome = "-"
                problems.append(f"batch {status.id}: {option} is {result.status}.")
            rows.append([option, task.name, times, result.id, result.status, outcome])
        # The last column, a return value, is not padded but shortened.
        widths = [max(len(row[i]) for row in rows) for i in range(5)]
        rule = ["-" * width for width in widths] + ["-" * len(rows[0][5])]
        for row in [rows[0], rule, *rows[1:]]:
            cells = [
                cell.rjust(width) if i == 3 else cell.ljust(width)
                for i, (cell, width) in enumerate(zip(row, widths, strict=False))
            ]
            self.stdout.write("  " + "  ".join([*cells, _shorten(row[5], 64)]).rstrip())
        return problems

    # --- helpers -----------------------------------------------------------

    def read(self, manifest):
        try:
            return json.loads(manifest.read_text())
        except FileNotFoundError:
            raise CommandError(
                f"{manifest} does not exist; run 'manage.py demo enqueue' first."
            ) from None

    def result(self, entry):
        return import_string(entry["task"]).get_result(entry["id"])

    def callback(self, status, event):
        """The TaskResult of a batch's callback, or None if it was not enqueued."""
        result_id = status.callback_results[event]
        if result_id.startswith("error:"):
            return None
        return import_string(status.callbacks[event]).get_result(result_id)


def _is_running(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # An exited child that its parent has not reaped yet is a zombie.
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def _shorten(text, width):
    return text if len(text) <= width else text[: width - 3] + "..."
