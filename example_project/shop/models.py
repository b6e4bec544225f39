"""The shop's one model: an order a customer placed."""

from django.db import models


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
