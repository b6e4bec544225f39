"""StatorModel: a model whose rows move through a StateGraph, one handler at a time.

Rows due for their state's handler are leased by runners with SKIP LOCKED; a
lease is a time (``state_locked_until``) after which the row is a failed try,
due again ``try_interval`` later for any runner, so runners that die leave
nothing to replay. A runner writes what its handlers returned only where its
lease still stands. Lease times come from the database's clock, which every
runner shares, not from each runner's host.
"""

from collections import defaultdict
from datetime import timedelta

from django.apps import apps
from django.core.exceptions import FieldDoesNotExist, ImproperlyConfigured
from django.db import models, router
from django.db.models import Count, Q
from django.utils import timezone

from ..dialects.isolation import atomic
from ..models.base import QueueQuerySet
from .graph import DEFAULT_TRY_INTERVAL
from .indexes import add_stator_indexes


class StateField(models.CharField):
    """The row's state: a CharField with the graph's states as choices."""

    def __init__(self, graph=None, **kwargs):
        self.graph = graph
        kwargs.setdefault("max_length", 100)
        if graph is not None:
            kwargs.setdefault("choices", graph.choices())
            kwargs.setdefault("default", graph.initial_state.name)
        super().__init__(**kwargs)

    def deconstruct(self):
        # Migrations see a plain CharField: a graph is code, not schema.
        name, _, args, kwargs = super().deconstruct()
        return name, "django.db.models.CharField", args, kwargs


class NextAttemptField(models.DateTimeField):
    """``state_next_attempt_at``: when the state's handler should next run.

    NULL in a state that runs no handler, however the row got there (created
    there, even with bulk_create, or saved there), so such rows stay out of
    the due index; set to now when a row is saved into a state with a handler
    without one. It also gives each concrete model its indexes (indexes.py).
    """

    def pre_save(self, model_instance, add):
        graph = model_instance.state_graph()
        state = graph.states.get(model_instance.state) if graph else None
        value = getattr(model_instance, self.attname)
        if state is not None and not state.runs_handler:
            value = None
        elif state is not None and value is None:
            value = timezone.now()
        if add and value is not None:
            # Whole milliseconds: leases compare it with the database's clock,
            # which SQLite reads no finer, and a row made within the current
            # millisecond would wait for the next one.
            value = value.replace(microsecond=value.microsecond // 1000 * 1000)
        setattr(model_instance, self.attname, value)
        return super().pre_save(model_instance, add)

    def contribute_to_class(self, cls, name, **kwargs):
        super().contribute_to_class(cls, name, **kwargs)
        if not cls._meta.abstract:
            add_stator_indexes(cls, name)

    def deconstruct(self):
        name, _, args, kwargs = super().deconstruct()
        return name, "django.db.models.DateTimeField", args, kwargs


class StatorQuerySet(QueueQuerySet):
    """Verbs of the rows of one StatorModel."""

    @property
    def graph(self):
        return self.model.state_graph()

    def due(self, now):
        """Rows whose handler should run now: in a state that has one, their
        next attempt has come, and no runner's lease holds them."""
        handled = [s.name for s in self.graph.states.values() if s.runs_handler]
        return self.filter(
            Q(state_locked_until__isnull=True) | Q(state_locked_until__lte=now),
            state__in=handled,
            state_next_attempt_at__lte=now,
        )

    def next_due(self, now, limit, excluding=()):
        """The keys of up to ``limit`` due rows, soonest due first: what a
        lease picks, read from the due index (indexes.DueIndex)."""
        due = self.due(now)
        if excluding:
            due = due.exclude(pk__in=excluding)
        return due.order_by("state_next_attempt_at").values("pk")[:limit]

    def lease_due(self, limit, lease_seconds, now=None, excluding=()):
        """Lease up to ``limit`` due rows, soonest due first; return (rows, lease).

        Runners skip rows another runner is leasing this moment (SKIP LOCKED),
        so no two runners lease one row; ``lease`` is the time the lease ends,
        stored on each row, and record_outcomes writes only rows that still
        carry it. Rows whose key is in ``excluding`` are left alone.

        A lease is a try begun: the row's attempts go up, and its next attempt
        moves to the lease's end plus its state's try_interval. A lease that
        runs out unanswered (its runner died, its handler hung) is thus a
        failed try, and the row waits try_interval after it like any other.
        ``now`` is the database's clock unless given: a runner whose host
        clock is ahead must not take rows whose leases have not ended.
        """
        now = now or self.database_now()
        lease = now + timedelta(seconds=lease_seconds)
        handled = [s for s in self.graph.states.values() if s.runs_handler]
        if not handled:
            return [], lease
        meta = self.model._meta
        connection = self.connection
        quote = connection.ops.quote_name
        pick = self.next_due(now, limit, excluding)
        pick_sql, pick_params = pick.query.get_compiler(using=self.db).as_sql()
        pick_sql += self.dialect.skip_locked_clause(connection)
        column = {name: quote(meta.get_field(name).column) for name in LEASE_COLUMNS}
        prepare = meta.get_field("state_locked_until").get_db_prep_save
        retries = " ".join("WHEN %s THEN %s" for _ in handled)
        retry_params = []
        for state in handled:
            at = lease + timedelta(seconds=state.try_interval)
            retry_params += [state.name, prepare(at, connection)]
        assignments = (
            f"{column['state_locked_until']} = %s, "
            f"{column['state_attempts']} = {column['state_attempts']} + 1, "
            f"{column['state_next_attempt_at']} = "
            f"CASE {column['state']} {retries} END"
        )
        with atomic(using=self.db), connection.cursor() as cursor:
            keys = self.dialect.update_picked(
                cursor,
                quote(meta.db_table),
                quote(meta.pk.column),
                assignments,
                [prepare(lease, connection), *retry_params],
                pick_sql,
                pick_params,
            )
        rows = list(self.filter(pk__in=keys)) if keys else []
        return rows, lease

    def record_outcomes(self, outcomes, lease, now=None):
        """Write what handlers returned, for the rows still under ``lease``.

        ``outcomes`` maps each row (an instance) to the State it moves to, or
        None to try again after its state's try_interval (the handler returned
        None, raised, or ran past its timeout; its lease counted the try). One
        UPDATE per target state and one per state retried: not one per row.
        Returns how many rows were written (rows whose lease ran out are left
        to their new holder).
        """
        now = now or self.database_now()
        moves, retries = defaultdict(list), defaultdict(list)
        for row, state in outcomes.items():
            if state is None:
                retries[row.state].append(row.pk)
            else:
                moves[state.name].append(row.pk)
        held = self.filter(state_locked_until=lease)
        written = 0
        with atomic(using=self.db):
            for name, pks in moves.items():
                state = self.graph.get(name)
                written += held.filter(pk__in=pks).update(**entering(state, now))
            for name, pks in retries.items():
                # A state no longer in the graph (renamed in code) is retried at
                # the default interval: its rows wait for a deploy, not forever.
                state = self.graph.states.get(name)
                interval = state.try_interval if state else DEFAULT_TRY_INTERVAL
                written += held.filter(pk__in=pks).update(
                    state_next_attempt_at=now + timedelta(seconds=interval),
                    state_locked_until=None,
                )
        return written

    def clear_handlerless_attempts(self, graph=None):
        """NULL the next attempt of the rows in states that run no handler
        (rows written by earlier versions kept one); return how many changed.

        ``graph`` is for a data migration, whose historical model has none.
        """
        graph = graph or self.graph
        handlerless = [s.name for s in graph.states.values() if not s.runs_handler]
        return self.filter(
            state__in=handlerless, state_next_attempt_at__isnull=False
        ).update(state_next_attempt_at=None)

    def counts_by_state(self):
        """{state name: rows in it}."""
        return dict(self.values_list("state").annotate(n=Count("pk")).order_by())

    def stuck(self, older_than_seconds, now=None):
        """Rows that entered a non-terminal state longer ago than the threshold."""
        now = now or timezone.now()
        terminal = [s.name for s in self.graph.states.values() if s.terminal]
        return self.exclude(state__in=terminal).filter(
            state_changed_at__lt=now - timedelta(seconds=older_than_seconds)
        )


class StatorModel(models.Model):
    """Abstract base: declare ``state = StateField(YourStates)`` on the subclass."""

    state_changed_at = models.DateTimeField(default=timezone.now)
    # When the state's handler should next run; NULL where none runs.
    state_next_attempt_at = NextAttemptField(
        null=True, blank=True, default=timezone.now
    )
    state_locked_until = models.DateTimeField(null=True, blank=True)
    # Tries of the current state's handler (counted as each begins) that did
    # not move the row on.
    state_attempts = models.PositiveIntegerField(default=0)

    objects = StatorQuerySet.as_manager()

    class Meta:
        abstract = True

    @classmethod
    def state_graph(cls):
        """The StateGraph of this model's ``state`` field; None without one."""
        try:
            field = cls._meta.get_field("state")
        except FieldDoesNotExist:
            return None
        return getattr(field, "graph", None)

    @property
    def state_object(self):
        """The current State (``state`` itself holds its name)."""
        return self.state_graph().get(self.state)

    def transition_perform(self, state):
        """Move this row to ``state`` now, whatever it was doing.

        Its handler runs on the next pass of a runner. A runner running the
        old state's handler meanwhile loses its lease: what that handler
        returns is dropped (its effects, if any, stand: handlers must be safe
        to run again).
        """
        state = self.state_graph().get(state)
        rows = rows_of(type(self), instance=self)
        values = entering(state, rows.database_now())
        rows.filter(pk=self.pk).update(**values)
        for name, value in values.items():
            setattr(self, name, value)


# The columns a lease writes, by field name.
LEASE_COLUMNS = (
    "state",
    "state_locked_until",
    "state_attempts",
    "state_next_attempt_at",
)


def entering(state, now):
    """The columns of a row entering ``state`` at ``now``, lease ended."""
    return {
        "state": state.name,
        "state_changed_at": now,
        "state_next_attempt_at": now if state.runs_handler else None,
        "state_locked_until": None,
        "state_attempts": 0,
    }


def runnable_models(labels=("*",)):
    """The StatorModels named by ``labels`` (model labels, or "*" for all)."""
    every = [
        model
        for model in apps.get_models()
        if issubclass(model, StatorModel) and model.state_graph() is not None
    ]
    if "*" in labels:
        return every
    chosen = []
    for label in labels:
        try:
            model = apps.get_model(label)
        except (LookupError, ValueError):
            raise ImproperlyConfigured(
                f"OPTIONS['state_machines'] names the model {label!r}, which is "
                "not installed (use 'app_label.ModelName')."
            ) from None
        if model not in every:
            raise ImproperlyConfigured(
                f"OPTIONS['state_machines'] names {label!r}, which is not a "
                "StatorModel with a StateField called 'state'."
            )
        chosen.append(model)
    return chosen


def states_without_handlers(models):
    """(model, state) for each state of these models' graphs that should run a
    handler and has none registered: what check E006 and a booting runner say."""
    return [
        (model, state)
        for model in models
        for state in model.state_graph().missing_handlers()
    ]


def timeouts_not_under_lease(models, lease):
    """(model, state) for each handled state of these models whose timeout is
    not below ``lease``: a lease must outlast the handler it covers."""
    return [
        (model, state)
        for model in models
        for state in model.state_graph().states.values()
        if state.runs_handler and state.timeout_under(lease) >= lease
    ]


def rows_of(model, instance=None):
    """The StatorQuerySet of a model's rows, on the database its router writes to.

    Not ``model.objects``: a model may replace its default manager, and its
    rows need not live in steady_queue's own database.
    """
    return StatorQuerySet(
        model=model, using=router.db_for_write(model, instance=instance)
    )


def clear_handlerless_attempts(model, graph=None, using=None):
    """NULL the next attempt of a model's rows in states that run no handler.

    For rows written before steady_queue did so itself; a data migration
    passes its historical model, the StateGraph and its database alias.
    """
    rows = StatorQuerySet(model=model, using=using or router.db_for_write(model))
    return rows.clear_handlerless_attempts(graph)
