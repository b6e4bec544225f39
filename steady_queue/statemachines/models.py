"""StatorModel: a model whose rows move through a StateGraph, one handler at a time.

Rows due for their state's handler are leased by runners with SKIP LOCKED; a
lease is a time (``state_locked_until``) after which any runner may take the
row again, so runners that die leave nothing to replay. A runner writes what
its handlers returned only where its lease still stands.
"""

from collections import defaultdict
from datetime import timedelta

from django.apps import apps
from django.core.exceptions import FieldDoesNotExist, ImproperlyConfigured
from django.db import models, router, transaction
from django.db.models import Count, Q
from django.utils import timezone

from ..models.base import QueueQuerySet
from .graph import DEFAULT_TRY_INTERVAL


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

    def lease_due(self, limit, lease_seconds, now=None):
        """Lease up to ``limit`` due rows, soonest due first; return (rows, lease).

        Runners skip rows another runner is leasing this moment (SKIP LOCKED),
        so no two runners lease one row; ``lease`` is the time the lease ends,
        stored on each row, and record_outcomes writes only rows that still
        carry it. A runner that dies holds its rows until then.
        """
        now = now or timezone.now()
        lease = now + timedelta(seconds=lease_seconds)
        meta = self.model._meta
        connection = self.connection
        quote = connection.ops.quote_name
        pick = self.due(now).order_by("state_next_attempt_at").values("pk")[:limit]
        pick_sql, pick_params = pick.query.get_compiler(using=self.db).as_sql()
        pick_sql += self.dialect.skip_locked_clause(connection)
        locked_until = meta.get_field("state_locked_until")
        with transaction.atomic(using=self.db), connection.cursor() as cursor:
            keys = self.dialect.update_picked(
                cursor,
                quote(meta.db_table),
                quote(meta.pk.column),
                f"{quote(locked_until.column)} = %s",
                [locked_until.get_db_prep_save(lease, connection)],
                pick_sql,
                pick_params,
            )
        rows = list(self.filter(pk__in=keys)) if keys else []
        return rows, lease

    def record_outcomes(self, outcomes, lease, now=None):
        """Write what handlers returned, for the rows still under ``lease``.

        ``outcomes`` maps each row (an instance) to the State it moves to, or
        None to try again after its state's try_interval. One UPDATE per target
        state and one per state retried: not one per row. Returns how many
        rows were written (rows whose lease ran out are left to their new
        holder).
        """
        now = now or timezone.now()
        moves, retries = defaultdict(list), defaultdict(list)
        for row, state in outcomes.items():
            if state is None:
                retries[row.state].append(row.pk)
            else:
                moves[state.name].append(row.pk)
        held = self.filter(state_locked_until=lease)
        written = 0
        with transaction.atomic(using=self.db):
            for name, pks in moves.items():
                state = self.graph.get(name)
                written += held.filter(pk__in=pks).update(
                    state=name,
                    state_changed_at=now,
                    state_next_attempt_at=now if state.runs_handler else None,
                    state_locked_until=None,
                    state_attempts=0,
                )
            for name, pks in retries.items():
                # A state no longer in the graph (renamed in code) is retried at
                # the default interval: its rows wait for a deploy, not forever.
                state = self.graph.states.get(name)
                interval = state.try_interval if state else DEFAULT_TRY_INTERVAL
                written += held.filter(pk__in=pks).update(
                    state_next_attempt_at=now + timedelta(seconds=interval),
                    state_locked_until=None,
                    state_attempts=models.F("state_attempts") + 1,
                )
        return written

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
    state_next_attempt_at = models.DateTimeField(
        null=True, blank=True, default=timezone.now, db_index=True
    )
    state_locked_until = models.DateTimeField(null=True, blank=True)
    # Tries of the current state's handler that did not move the row on.
    state_attempts = models.PositiveIntegerField(default=0)

    objects = StatorQuerySet.as_manager()

    class Meta:
        abstract = True
        indexes = [models.Index(fields=["state", "state_next_attempt_at"])]

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
        now = timezone.now()
        values = {
            "state": state.name,
            "state_changed_at": now,
            "state_next_attempt_at": now if state.runs_handler else None,
            "state_locked_until": None,
            "state_attempts": 0,
        }
        database = router.db_for_write(type(self), instance=self)
        type(self)._base_manager.using(database).filter(pk=self.pk).update(**values)
        for name, value in values.items():
            setattr(self, name, value)


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


def rows_of(model):
    """The StatorQuerySet of a model's rows, on the database its router writes to.

    Not ``model.objects``: a model may replace its default manager, and its
    rows need not live in steady_queue's own database.
    """
    return StatorQuerySet(model=model, using=router.db_for_write(model))
