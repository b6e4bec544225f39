"""emit_event(): release the jobs waiting for an event, in the caller's transaction."""

import json

from django.utils import timezone

from ..compat import DEFAULT_TASK_BACKEND_ALIAS, task_backends
from ..exceptions import ResultNotStorableError
from ..pipeline.outcome import refuse_unstorable
from .steps import check_name, models_module


def emit_event(name, payload=None, *, backend=DEFAULT_TASK_BACKEND_ALIAS):
    """Emit the event ``name`` with a JSON ``payload``; return how many waiting
    jobs it released.

    Written in the caller's transaction (rolled back with it) on the database
    of the steady_queue backend ``backend``: every job of that backend alias
    waiting for ``name`` is released (made ready) when it commits, and one
    that begins to wait within OPTIONS["event_retention"] receives it at
    once. Emitting a name again replaces the payload later waiters receive.
    """
    check_name(name, "emit_event()")
    try:
        stored = json.loads(json.dumps(payload))
        if stored != payload:
            # Waiters would receive something else: {1: "a"} as {"1": "a"},
            # a tuple as a list.
            raise ValueError(
                "it would not come back as it was (JSON keeps only string keys, "
                "and lists, not tuples)"
            )
        refuse_unstorable(stored)
        payload = stored
    except (TypeError, ValueError) as error:
        what = error.args[0] if isinstance(error, ResultNotStorableError) else error
        raise ValueError(
            f"emit_event({name!r}) takes a JSON payload (dicts, lists, strings, "
            f"numbers, booleans, None); this one cannot be stored: {what}."
        ) from None
    queue_backend = task_backends[backend]
    database = getattr(queue_backend, "database", None)
    if database is None:
        raise TypeError(
            f"emit_event() needs a SteadyQueueBackend; the TASKS alias {backend!r} "
            "is another kind of backend."
        )
    released = (
        models_module()
        .Event.objects.using(database)
        .emit(queue_backend.alias, name, payload, timezone.now())
    )
    return len(released)
