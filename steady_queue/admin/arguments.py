"""A job's arguments as the Python call its task gets, for the job page."""

import json

from django.db.models import Model
from django.utils.translation import gettext

from ..exceptions import SteadyQueueError
from ..pipeline.arguments import decode_arguments

# A call longer than this is shown one argument per line.
ONE_LINE = 88


def python_call(job):
    """The job's call as Python source: ``add(Decimal('1.5'), when=<Order 7>)``.

    Model instances show as ``<Order 7>``; one whose row is gone shows its pk
    and says so, without failing the page. Arguments that cannot be decoded
    are shown as the JSON they are stored as, after the reason.
    """
    name = job.task_path.rpartition(".")[2]
    try:
        args, kwargs = decode_arguments(job.arguments, load_rows=False, signed=False)
    except SteadyQueueError as error:
        stored = json.dumps(job.arguments, indent=2, sort_keys=True, default=str)
        return f"# {error}\n{stored}"
    shown = [_repr(value) for value in args]
    shown += [f"{key}={_repr(value)}" for key, value in kwargs.items()]
    call = f"{name}({', '.join(shown)})"
    if len(call) <= ONE_LINE:
        return call
    return f"{name}(\n" + "".join(f"    {item},\n" for item in shown) + ")"


def _repr(value):
    """repr(), except that a model instance reads ``<Order 7>``, fetching nothing
    but whether its row still exists."""
    if isinstance(value, Model):
        return _model_repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_repr(item) for item in value) + "]"
    if isinstance(value, tuple):
        items = [_repr(item) for item in value]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(value, dict):
        pairs = (f"{key!r}: {_repr(item)}" for key, item in value.items())
        return "{" + ", ".join(pairs) + "}"
    return repr(value)


def _model_repr(instance):
    model = type(instance)
    found = model._default_manager.filter(pk=instance.pk).exists()
    if found:
        return f"<{model._meta.object_name} {instance.pk!r}>"
    # The one word of the call that is not Python: it tells the reader the row
    # is gone.
    missing = gettext("(missing)")
    return f"<{model._meta.object_name} {instance.pk!r} {missing}>"
