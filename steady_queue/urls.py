"""URLs a project includes: path("steady_queue/", include("steady_queue.urls"))."""

from django.urls import path

from . import views

app_name = "steady_queue"
urlpatterns = [
    path("metrics", views.metrics, name="metrics"),
    path("health", views.health, name="health"),
]
