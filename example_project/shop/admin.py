from django.contrib import admin

from .models import Order, Shipment


@admin.register(Order)
class OrderAdmin(admin.ModelAdmin):
    list_display = ["id", "customer_email", "item", "amount", "created_at"]


@admin.register(Shipment)
class ShipmentAdmin(admin.ModelAdmin):
    list_display = ["id", "order", "state", "tracking_number", "state_changed_at"]
    list_filter = ["state"]
