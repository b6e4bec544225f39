"""docs/workflows.rst's worked example, pasted into a new project as it is.

Each of the page's blocks that opens with a file's path (``# shop/...py``,
``# mysite/urls.py``) is written to that file; then an order is placed
through the page's view, a worker runs what is due, the payment provider's
callback reaches the page's webhook through Django's CSRF check as a real
one would (no token), and the order ships with the card charged once.
"""

import json

from .docs_blocks import files_on, readme_block
from .new_site import MARKS, Project

pytestmark = MARKS

PAGE = "workflows.rst"


def post(project, url, data, csrf_checks):
    """POST ``data`` to ``url`` with Django's test client; return (status, body)."""
    answer = project.shell(
        f"""
        from django.test import Client

        client = Client(enforce_csrf_checks={csrf_checks}, SERVER_NAME="localhost")
        response = client.post({url!r}, {data!r})
        print("=>", response.status_code, response.content.decode())
        """
    )
    status, body = answer.split(" ", 1)
    return int(status), json.loads(body) if status == "200" else body


def test_the_workflow_example_runs_as_pasted_and_ships_once_paid(tmp_path):
    project = Project.start(tmp_path / "site")
    project.configure(
        readme_block('"BACKEND": "steady_queue.backend.SteadyQueueBackend"'),
        project.installed_apps("shop"),
    )
    files = files_on(PAGE)
    assert sorted(files) == [
        "mysite/urls.py",
        "shop/models.py",
        "shop/tasks.py",
        "shop/views.py",
    ]
    for path, code in files.items():
        project.write(path, code)
    project.manage("makemigrations", "shop")
    project.manage("migrate")

    # A customer's order (a form post: the client sends no CSRF check here).
    status, placed = post(
        project, "/orders/", {"item": "Teapot", "amount": "25.00"}, csrf_checks=False
    )
    assert status == 200, placed
    ran = project.manage("steady_queue", "--once").stdout
    # The charge parks on its wait; the reservation ends; the shipment waits.
    assert ran.startswith("Ran 2 job(s)"), ran

    # The provider's callback: no CSRF token, as from another server.
    status, answer = post(
        project,
        f"/orders/{placed['order']}/paid/",
        {"reference": "pay-1"},
        csrf_checks=True,
    )
    assert (status, answer) == (200, {"order": placed["order"], "released": 1})
    ran = project.manage("steady_queue", "--once").stdout
    assert ran.startswith("Ran 2 job(s)"), ran

    shipped = project.shell(
        f"""
        from shop.models import Charge
        from shop.tasks import ship_order

        result = ship_order.get_result({placed["shipment"]!r})
        print("=>", result.status.name, result.return_value, Charge.objects.count())
        """
    )
    assert shipped == (
        f"SUCCESSFUL {{'order': {placed['order']}, 'charge': 1, 'item': 'Teapot'}} 1"
    )
