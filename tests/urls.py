from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("steady_queue/", include("steady_queue.urls")),
]
