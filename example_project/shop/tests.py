"""The shop's own tests: they run its jobs with steady_queue.testing.

Run them with ``python manage.py test shop`` from example_project/. The jobs
run in the test's transaction, through the configured steady_queue backend:
the same serialization, decorators and results as in production.
"""

from django.core import mail
from django.test import TestCase
from steady_queue.testing import assert_enqueued, capture_enqueued, run_pending

from . import tasks
from .models import Order


class PlacingAnOrderTests(TestCase):
    def test_the_confirmation_is_enqueued_with_the_order_and_sent_when_run(self):
        response = self.client.post("/orders/", {"email": "ada@example.com"})
        order = Order.objects.get(pk=response.json()["order"])

        (job,) = assert_enqueued(tasks.send_order_confirmation, args=[order.pk])
        self.assertEqual(job.task.queue_name, "mail")

        self.assertEqual(run_pending(), 1)
        self.assertEqual(len(mail.outbox), 1)
        self.assertEqual(mail.outbox[0].to, ["ada@example.com"])
        status = self.client.get(f"/orders/{order.pk}/").json()
        self.assertEqual(status["status"], "SUCCESSFUL")

    def test_a_declined_card_fails_its_job_after_its_retries(self):
        order = Order.objects.create(
            customer_email="bob@example.com", item="Kettle", amount="0.00"
        )
        with capture_enqueued() as captured:
            tasks.charge_card.enqueue(order.pk)
        captured.assert_enqueued(tasks.charge_card, count=1)

        # The retry waits a second; run_scheduled runs it without waiting.
        self.assertEqual(run_pending(), 1)
        waiting = tasks.charge_card.get_result(captured[0].id)
        self.assertEqual((waiting.status, len(waiting.errors)), ("READY", 1))
        self.assertEqual(run_pending(run_scheduled=True), 1)

        result = tasks.charge_card.get_result(captured[0].id)
        self.assertEqual(result.status, "FAILED")
        self.assertEqual(result.attempts, 2)
        self.assertTrue(
            result.errors[-1].exception_class_path.endswith("PaymentDeclined")
        )

    def test_the_sales_report_is_unique_while_pending(self):
        first = tasks.build_sales_report.enqueue()
        second = tasks.build_sales_report.enqueue()
        self.assertEqual(first.id, second.id)

        self.assertEqual(run_pending(), 1)
        report = tasks.build_sales_report.get_result(first.id).return_value
        self.assertEqual(report["orders"], 0)
