from django.contrib import admin
from django.urls import include, path

from shop import views

urlpatterns = [
    path("admin/", admin.site.urls),
    # Prometheus metrics at /steady_queue/metrics (see docs/operations.rst).
    path("steady_queue/", include("steady_queue.urls")),
    path("orders/", views.place_order, name="place-order"),
    path("orders/<int:order_id>/", views.order_status, name="order-status"),
    path(
        "orders/<int:order_id>/payment-confirmed/",
        views.payment_webhook,
        name="payment-webhook",
    ),
]
