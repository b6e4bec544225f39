"""Views that enqueue tasks and report on them."""

from django.db import transaction
from django.http import Http404, JsonResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST
from steady_queue import emit_event

from .models import Order
from .tasks import payment_confirmed, send_order_confirmation

try:
    from django.tasks.exceptions import TaskResultDoesNotExist
except ImportError:  # Django 5.2 with the django-tasks backport
    from django_tasks.exceptions import TaskResultDoesNotExist


@csrf_exempt  # an example API endpoint; a real one would authenticate the caller
@require_POST
def place_order(request):
    """Create an order and enqueue its confirmation in the same transaction.

    The job row is written on the same connection as the order: if anything
    in this block raises, neither the order nor the email job exists.
    """
    with transaction.atomic():
        order = Order.objects.create(
            customer_email=request.POST.get("email", "customer@example.com"),
            item=request.POST.get("item", "Teapot"),
            amount=request.POST.get("amount", "25.00"),
        )
        result = send_order_confirmation.enqueue(order.pk)
        order.confirmation_task_id = result.id
        order.save(update_fields=["confirmation_task_id"])
    return JsonResponse({"order": order.pk, "status": result.status}, status=201)


@require_GET
def order_status(request, order_id):
    """Report the confirmation email's status for one order.

    The result id is looked up through the order, never taken from the URL:
    ids are sequential, so exposing get_result(<any id>) would leak other
    customers' tasks. A real shop would also check the order is the user's.
    """
    order = get_object_or_404(Order, pk=order_id)
    if not order.confirmation_task_id:
        raise Http404("This order has no confirmation task.")
    try:
        result = send_order_confirmation.get_result(order.confirmation_task_id)
    except TaskResultDoesNotExist:
        raise Http404("The confirmation task was cleared.") from None
    return JsonResponse(
        {
            "order": order.pk,
            "status": result.status,
            "attempts": result.attempts,
            "finished_at": result.finished_at,
        }
    )


@csrf_exempt  # a real provider's callback would be signed, and its signature checked
@require_POST
def payment_webhook(request, order_id):
    """The payment provider confirms an order's payment: emit the event its
    charge_order job waits for (docs/workflows.rst).

    The event is written in this request's transaction: were it to roll back,
    no job would be released.
    """
    order = get_object_or_404(Order, pk=order_id)
    with transaction.atomic():
        released = emit_event(
            payment_confirmed(order.pk),
            payload={"reference": request.POST.get("reference", "")},
        )
    return JsonResponse({"order": order.pk, "released": released})
