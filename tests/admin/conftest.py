"""Admin fixtures: an operator who may act, and staff who may only look."""

import pytest
from django.contrib.auth.models import Permission, User


def staff_with(*codenames):
    user = User.objects.create_user(
        username="-".join(codenames) or "staff", password="pw", is_staff=True
    )
    user.user_permissions.set(
        Permission.objects.filter(
            content_type__app_label="steady_queue", codename__in=codenames
        )
    )
    return user


VIEW = (
    "view_job",
    "view_pause",
    "view_process",
    "view_recurringtask",
    "view_semaphore",
)


@pytest.fixture
def operator(client, db):
    """Logged in with every steady_queue permission."""
    client.force_login(User.objects.create_superuser("root", "r@example.com", "pw"))
    return client


@pytest.fixture
def viewer(client, db):
    """Logged in as staff who may view everything but act on nothing."""
    client.force_login(staff_with(*VIEW))
    return client
