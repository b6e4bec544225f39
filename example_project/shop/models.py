"""The shop's models: an order a customer placed, its charges and its shipment."""

from django.db import models
from steady_queue.statemachines import State, StateField, StateGraph, StatorModel


class Order(models.Model):
    customer_email = models.EmailField()
    item = models.CharField(max_length=200)
    amount = models.DecimalField(max_digits=10, decimal_places=2)
    created_at = models.DateTimeField(auto_now_add=True)
    # The result id of the confirmation email task. Result ids are sequential
    # integers, so they are only shown to whoever may see this order.
    confirmation_task_id = models.CharField(max_length=64, blank=True)

    def __str__(self):
        return f"Order {self.pk}: {self.item} for {self.customer_email}"


class Charge(models.Model):
    """A (pretend) charge on the customer's card: one row per call to the
    payment provider, so the demo can count that a card is charged once."""

    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="charges")
    amount = models.DecimalField(max_digits=10, decimal_places=2)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"Charge {self.pk}: {self.amount} for order {self.order_id}"


class ShipmentStates(StateGraph):
    """How an order's parcel moves: a state machine advanced by steady_queue."""

    packing = State(try_interval="10s")
    in_transit = State(try_interval="10s")
    delivered = State(terminal=True)
    lost = State(externally_progressed=True)  # moved here by hand, in the admin


class Shipment(StatorModel):
    order = models.OneToOneField(Order, on_delete=models.CASCADE)
    state = StateField(ShipmentStates)
    tracking_number = models.CharField(max_length=20, blank=True)

    def __str__(self):
        return f"Shipment of order {self.order_id} ({self.state})"


@ShipmentStates.packing.handler
def hand_to_carrier(shipment):
    """Runs once the shipment exists; must be safe to run twice (at least once)."""
    if not shipment.tracking_number:
        shipment.tracking_number = f"SQ{shipment.order_id:08d}"
        shipment.save(update_fields=["tracking_number"])
    return ShipmentStates.in_transit


@ShipmentStates.in_transit.handler
def confirm_delivery(shipment):
    # A real shop would ask the carrier; None would mean "ask again in 10 s".
    return ShipmentStates.delivered
