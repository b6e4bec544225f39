"""The shop's own tests: they run its jobs with steady_queue.testing.

Run them with ``python manage.py test shop`` from example_project/. The jobs
run in the test's transaction, through the configured steady_queue backend:
the same serialization, decorators and results as in production.
"""

from django.core import mail
from django.test import TestCase
from steady_queue import depends_on
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


class OrderWorkflowTests(TestCase):
    def test_the_card_is_charged_once_and_the_order_ships_once_paid(self):
        order = Order.objects.create(
            customer_email="ada@example.com", item="Teapot", amount="25.00"
        )
        charge = tasks.charge_order.enqueue(order.pk)
        reserve = tasks.reserve_stock.enqueue(order.pk)
        with depends_on(charge, reserve):
            ship = tasks.ship_order.enqueue(order.pk)

        # The stock is reserved; the charge is made, then waits for the
        # provider's confirmation; the shipment waits for both.
        run_pending()
        self.assertEqual(
            tasks.reserve_stock.get_result(reserve.id).status, "SUCCESSFUL"
        )
        self.assertEqual(tasks.charge_order.get_result(charge.id).status, "READY")
        self.assertEqual(tasks.ship_order.get_result(ship.id).status, "READY")

        response = self.client.post(
            f"/orders/{order.pk}/payment-confirmed/", {"reference": "PAY-1"}
        )
        self.assertEqual(response.json()["released"], 1)

        # charge_order runs again from the top: its step returns the stored
        # charge, so the card is not charged twice; then the order ships.
        run_pending()
        charged = tasks.charge_order.get_result(charge.id)
        self.assertEqual(charged.return_value["confirmation"], "PAY-1")
        self.assertEqual(order.charges.count(), 1)
        shipped = tasks.ship_order.get_result(ship.id)
        self.assertEqual(shipped.status, "SUCCESSFUL")
        self.assertEqual(shipped.return_value["charge"], charged.return_value["charge"])
