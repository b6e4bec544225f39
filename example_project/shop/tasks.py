"""The shop's background tasks: each shows one feature of steady_queue.

Arguments and return values are stored as JSON, so tasks take an order's
primary key, never the Order itself, and return plain dicts.
"""

import asyncio
from datetime import timedelta
from decimal import Decimal

from django.core.mail import send_mail
from django.db.models import Count, Sum
from django.utils import timezone
from steady_queue import (
    dependency_results,
    emit_event,
    limits_concurrency,
    limits_rate,
    retry,
    step,
    timeout,
    unique,
    wait_for_event,
)
from steady_queue.recurring import recurring

try:
    from django.tasks import task
except ImportError:  # Django 5.2 with the django-tasks backport
    from django_tasks import task

from .models import Charge, Order


class PaymentDeclined(Exception):
    """The (pretend) payment provider refused the card."""


@task(queue_name="mail")
def send_order_confirmation(order_id):
    """Email the customer; with the console backend the mail is printed."""
    order = Order.objects.get(pk=order_id)
    subject = f"Your order #{order.pk}: {order.item}"
    sent = send_mail(
        subject,
        f"Thanks! We received {order.amount} for {order.item}.",
        None,
        [order.customer_email],
    )
    return {"to": order.customer_email, "subject": subject, "sent": sent}


@unique()
@task(queue_name="reports", priority=-10)
def build_sales_report():
    """Summarise every order; the dict is stored as the task's return value."""
    totals = Order.objects.aggregate(orders=Count("pk"), revenue=Sum("amount"))
    return {
        "orders": totals["orders"],
        "revenue": str(totals["revenue"] or Decimal("0")),
    }


@task
async def fetch_exchange_rate(currency):
    """An async task: it runs on the worker's event loop, next to other ones."""
    await asyncio.sleep(0.5)  # stands in for an HTTP call
    rates = {"EUR": "0.92", "GBP": "0.79", "JPY": "151.20"}
    return {"currency": currency, "rate": rates[currency]}


@retry(attempts=2, wait=1, on=(PaymentDeclined,))
@task
def charge_card(order_id):
    """Always fails, to show a retry and how the final failure is recorded."""
    raise PaymentDeclined(f"card declined for order {order_id}")


@task(takes_context=True)
def send_review_reminder(context, order_id):
    """Enqueued with run_after: a dispatcher releases it when the time comes."""
    return {
        "order": order_id,
        "result_id": context.task_result.id,
        "attempt": context.attempt,
    }


@task(queue_name="urgent", priority=50)
def alert_fraud_team(order_id, reason):
    """High priority on a queue with its own worker."""
    return {"order": order_id, "reason": reason, "alerted": True}


@recurring("every 2 seconds", key="shop.heartbeat")
@task
def count_recent_orders():
    """Recurring: the scheduler enqueues it every 2 seconds, once per tick."""
    since = timezone.now() - timedelta(hours=1)
    return {"orders_last_hour": Order.objects.filter(created_at__gte=since).count()}


@limits_concurrency(to=1, key=lambda customer_email: customer_email)
@task
def sync_loyalty_points(customer_email):
    """One sync per customer at a time: a second one waits, blocked, for the first."""
    orders = Order.objects.filter(customer_email=customer_email)
    points = sum(int(order.amount) for order in orders)
    return {"customer": customer_email, "points": points}


@timeout(1)
@task
async def fetch_supplier_quote(item):
    """Its supplier never answers: the coroutine is cancelled after 1 second."""
    await asyncio.sleep(30)
    return {"item": item}


# --- The restock batch -------------------------------------------------------
# The demo enqueues one restock_item per product inside steady_queue.batch():
# once every one of them has ended, the batch enqueues its callbacks.


class SupplierError(Exception):
    """The (pretend) supplier cannot deliver a product."""


# The supplier stopped making this one: its restock fails, and so the batch does.
DISCONTINUED = {"Bone-china cup"}


# The supplier's API takes two orders a second: the other restocks of the
# batch wait (blocked) for the next free slot, and start a second later.
SUPPLIER_RATE = 2


@limits_rate(to=SUPPLIER_RATE, per="1s", group="supplier-api")
@task
def restock_item(item, quantity):
    """Order more of one product from the supplier; a job of the restock batch."""
    if item in DISCONTINUED:
        raise SupplierError(f"{item!r} is discontinued")
    return {"item": item, "ordered": quantity}


@task(queue_name="reports")
def summarize_restock(batch):
    """on_finish: enqueued once every restock has ended, however they ended.

    ``batch`` is the batch's status as a dict: id, event, state, size,
    finished, failed, discarded and metadata.
    """
    return {
        "state": batch["state"],
        "restocked": batch["finished"],
        "not_restocked": batch["failed"] + batch["discarded"],
    }


@task
def announce_restock(batch):
    """on_success: only if every restock finished (not in the demo: one fails)."""
    return {"batch": batch["id"], "announced": True}


@task(queue_name="mail")
def alert_purchasing(batch):
    """on_failure: some restock failed or was discarded; tell purchasing."""
    not_restocked = batch["failed"] + batch["discarded"]
    sent = send_mail(
        f"Restock batch {batch['id']}: {not_restocked} of {batch['size']} failed",
        "See the failed restock_item jobs in the admin.",
        None,
        ["purchasing@example.com"],
    )
    return {"to": "purchasing@example.com", "sent": sent}


# --- The order workflow ------------------------------------------------------
# charge_order and reserve_stock run side by side; ship_order waits for both
# (the demo enqueues it inside steady_queue.depends_on()). charge_order charges
# the card in a durable step, then waits for the payment provider to confirm
# the payment, an event, without holding a worker: when the event comes, the
# job runs again from the top, and the step returns the stored charge instead
# of charging the card a second time. See docs/workflows.rst.


def payment_confirmed(order_id):
    """The name of the event the payment provider's webhook emits for an order."""
    return f"payment-confirmed:{order_id}"


def charge_with_provider(order_id):
    """The (pretend) call to the payment provider: one Charge row per call."""
    order = Order.objects.get(pk=order_id)
    charge = Charge.objects.create(order=order, amount=order.amount)
    return {"charge": charge.pk, "amount": str(charge.amount)}


@task
def charge_order(order_id):
    """Charge once, then park until the payment is confirmed (5 minutes at most)."""
    charge = step("charge", charge_with_provider, order_id)
    confirmed = wait_for_event(
        payment_confirmed(order_id), timeout=timedelta(minutes=5)
    )
    return {**charge, "confirmation": confirmed["reference"]}


@task
def reserve_stock(order_id):
    """Put the ordered item aside; runs beside charge_order."""
    order = Order.objects.get(pk=order_id)
    return {"item": order.item, "reserved": 1}


@task
def ship_order(order_id):
    """Runs once charge_order and reserve_stock both succeeded; reads their results."""
    charged, reserved = dependency_results()
    return {
        "order": order_id,
        "charge": charged.return_value["charge"],
        "item": reserved.return_value["item"],
    }


@task
def confirm_payment(order_id):
    """Stands in for the provider's webhook (shop.views.payment_webhook)."""
    emit_event(
        payment_confirmed(order_id), payload={"reference": f"PAY-{order_id:05d}"}
    )
    return {"event": payment_confirmed(order_id)}
