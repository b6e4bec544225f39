"""Process: the registry row every supervisor, worker and dispatcher heartbeats."""

import functools
import os
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.db import models
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

# The models that import this module, read through their package when called.
from .. import models as models_package
from ..dialects.isolation import atomic
from ..exceptions import ProcessPrunedError, error_payload
from ..pipeline.outcome import Outcome
from .base import QueueQuerySet
from .cancelled_run import CancelledRun


class ProcessQuerySet(QueueQuerySet):
    def register(
        self, *, kind, name, supervisor_id=None, metadata=None, code_version=""
    ):
        """Insert the row for the calling process and return it."""
        now = self.database_now()
        namespace = pid_namespace()
        if namespace is not None:
            # Where its PID means something: a reader sharing it can see
            # the process gone (Process.has_exited_here).
            metadata = {**(metadata or {}), "pid_namespace": namespace}
        return self.create(
            kind=kind,
            name=name,
            pid=os.getpid(),
            hostname=socket.gethostname(),
            supervisor_id=supervisor_id,
            metadata=metadata or {},
            code_version=code_version,
            last_heartbeat_at=now,
            created_at=now,
        )

    def prunable(self, alive_threshold, now=None):
        """Processes whose last heartbeat is older than the threshold (seconds).

        Judged by the database's clock, which wrote every heartbeat: a host
        whose own clock is off neither prunes live processes nor gets pruned.
        """
        now = now or self.database_now()
        return self.filter(
            last_heartbeat_at__lt=now - timedelta(seconds=alive_threshold)
        )

    def alive(self, alive_threshold, now=None):
        """Processes that heartbeated within the threshold (seconds), by the
        database's clock."""
        now = now or self.database_now()
        return self.filter(
            last_heartbeat_at__gte=now - timedelta(seconds=alive_threshold)
        )

    def running_versions(self):
        """The code versions these processes run, sorted ("" for a release
        from before processes recorded theirs)."""
        versions = self.order_by().values_list("code_version", flat=True)
        return sorted(set(versions))

    def queue_lists_by_version(self):
        """Return {code version: {(backend alias, queue list), ...}} for these
        processes, from what each worker recorded (its metadata's
        ``backend`` and comma-joined ``queues``). One read, no lock."""
        lists = {}
        rows = self.order_by().values_list("code_version", "metadata")
        for version, metadata in rows:
            metadata = metadata if isinstance(metadata, dict) else {}
            queues = str(metadata.get("queues") or "*")
            entry = (metadata.get("backend"), tuple(queues.split(",")))
            lists.setdefault(version, set()).add(entry)
        return lists

    def not_running(self, version):
        """These processes, but those that run ``version``."""
        return self.exclude(code_version=version)

    def counts_by_kind(self):
        """Return {kind: number of processes}."""
        rows = self.values_list("kind").annotate(count=models.Count("pk"))
        return dict(rows.order_by())

    def running_jobs(self):
        """Return {process id: [(job id, task path, claimed at), ...]}."""
        claims = (
            models_package.ClaimedExecution.objects.using(self.db)
            .filter(process_id__in=self.values("pk"))
            .order_by("created_at", "job_id")
            .values_list("process_id", "job_id", "job__task_path", "created_at")
        )
        running = {}
        for process_id, job_id, task_path, claimed_at in claims:
            running.setdefault(process_id, []).append((job_id, task_path, claimed_at))
        return running

    def supervised_by(self, supervisor_id):
        return self.filter(supervisor_id=supervisor_id)

    def named(self, names):
        return self.filter(name__in=names)

    def embedded_here(self, server):
        """The supervisors of this host embedded in ``server`` ("runserver",
        "asgi"); read without a lock (deregister() locks each row)."""
        return self.filter(
            kind="supervisor",
            hostname=socket.gethostname(),
            metadata__embedded=server,
        )

    def gone_quiet(self, alive_threshold):
        """Processes past the threshold, each with ``silent_for``: seconds since
        its last heartbeat, by the database's clock."""
        now = self.database_now()
        quiet = list(self.prunable(alive_threshold, now))
        for process in quiet:
            process.silent_for = (now - process.last_heartbeat_at).total_seconds()
        return quiet

    def prune(self):
        """Deregister these processes one by one, failing the jobs they held;
        yield each as it is pruned, so a failure midway loses no report of
        the ones before it."""
        for process in self.order_by("pk"):
            message = (
                f"{process.describe()} stopped heartbeating (last at "
                f"{process.last_heartbeat_at:%Y-%m-%d %H:%M:%S%z}) and was pruned "
                "while running this job."
            )
            # Kept on the instance so the caller can report the failed jobs.
            process.resolved_job_ids = process.deregister(
                claims_error=error_payload(ProcessPrunedError, message)
            )
            yield process


# The kinds of process there are, as the admin names them.
KINDS = [
    ("supervisor", _("supervisor")),
    ("worker", _("worker")),
    ("dispatcher", _("dispatcher")),
    ("scheduler", _("scheduler")),
    ("state_runner", _("state runner")),
]


class Process(models.Model):
    """A live steady_queue process, as long as it keeps heartbeating."""

    kind = models.CharField(_("kind"), max_length=32, choices=KINDS)
    name = models.CharField(_("name"), max_length=128, unique=True)
    pid = models.IntegerField(_("PID"))
    hostname = models.CharField(_("hostname"), max_length=255)
    supervisor_id = models.BigIntegerField(_("supervisor id"), null=True, blank=True)
    metadata = models.JSONField(_("metadata"), default=dict, blank=True)
    # The code version the process runs (conf/version.py). The database
    # default lets a release from before this column register beside one
    # that has it, during a rolling deploy: its rows read "".
    code_version = models.CharField(
        _("code version"), max_length=128, blank=True, db_default=""
    )
    last_heartbeat_at = models.DateTimeField(_("last heartbeat at"))
    created_at = models.DateTimeField(_("created at"))

    objects = ProcessQuerySet.as_manager()

    class Meta:
        db_table = "steady_queue_processes"
        verbose_name = _("process")
        verbose_name_plural = _("processes")
        indexes = [
            models.Index(fields=["last_heartbeat_at"], name="sq_process_heartbeat"),
            models.Index(fields=["supervisor_id"], name="sq_process_supervisor"),
        ]

    def __str__(self):
        """The process as the admin names it, in the reader's language."""
        text = gettext("%(kind)s %(name)s (pid %(pid)s on %(host)s)")
        return text % {
            "kind": self.get_kind_display(),
            "name": self.name,
            "pid": self.pid,
            "host": self.hostname,
        }

    def describe(self):
        """The process as logs and commands name it."""
        return f"{self.kind} {self.name} (pid {self.pid} on {self.hostname})"

    def describe_version(self):
        """Its code version as a sentence names it."""
        return describe_version(self.code_version)

    def has_exited_here(self):
        """Whether this process is seen gone: it registered from the caller's
        machine and PID namespace (pid_namespace), and no process has its PID
        now, so it was killed without deregistering. False where that cannot
        be told: another machine or container, or a system without /proc."""
        here = pid_namespace()
        if here is None or self.metadata.get("pid_namespace") != here:
            return False
        return not is_running(self.pid)

    def heartbeat(self):
        """Record that this process is alive; return False if its row is gone."""
        db = self._state.db
        updated = (
            type(self)
            .objects.using(db)
            .filter(pk=self.pk)
            .update(last_heartbeat_at=type(self).objects.using(db).database_now())
        )
        return updated == 1

    def claims(self):
        return models_package.ClaimedExecution.objects.using(self._state.db).held_by(
            self.pk
        )

    def cancelled_runs(self):
        """Runs of cancelled jobs this process may still be making."""
        return CancelledRun.objects.using(self._state.db).of(self.pk)

    def cancelled_runs_ended(self, job_ids):
        """One cancelled run of each of these jobs, ended in this process."""
        return CancelledRun.objects.using(self._state.db).ended(self.pk, job_ids)

    def still_holds(self, job_ids):
        """Which of these jobs this process still holds a claim on."""
        held = self.claims().filter(job_id__in=job_ids)
        return set(held.values_list("job_id", flat=True))

    def record_succeeded_runs(self, runs, preserve_finished_jobs=True):
        """Record as succeeded the runs this (dead) process finished well and
        had not written (shared_claims.SucceededRun); return their job ids.

        Only claims it still holds are recorded (finalize_all), each in the
        transaction that deletes its claim: run before deregister, which
        fails what is left, so no job is both.
        """
        if not runs:
            return []
        db = self._state.db
        by_id = {run.job_id: run for run in runs}
        jobs = models_package.Job.objects.using(db).filter(
            pk__in=self.claims().filter(job_id__in=by_id).values("job_id")
        )
        outcomes = [succeeded_outcome(job, by_id[job.pk], self.name) for job in jobs]
        recorded = models_package.ClaimedExecution.objects.using(db).finalize_all(
            outcomes, self.pk, preserve_finished_jobs
        )
        return [outcome.job.pk for outcome in recorded]

    def deregister_after_overrun(self, errors, others_error, never_started=()):
        """Fail the overrun jobs ({job id: error}), then deregister, failing the
        rest of the claims with ``others_error``. Return (ids failed as
        overrun, ids failed with others_error)."""
        db = self._state.db
        rows = type(self).objects.using(db).filter(pk=self.pk)
        with atomic(using=db):
            # The row first, as deregister() and so a pruner lock it: one lock
            # order, no deadlock; and if it is gone, its claims were resolved.
            if not rows.lock_rows():
                return [], []
            failed = models_package.ClaimedExecution.objects.using(db).fail_overrun(
                self.pk, errors, self.name
            )
            others = self.deregister(
                claims_error=others_error, never_started=never_started
            )
        return failed, others

    def deregister_with_children(self):
        """Deregister the processes this supervisor supervises, then it, their
        claims released to ready; return the ids of the jobs released."""
        children = type(self).objects.using(self._state.db).supervised_by(self.pk)
        released = [job_id for child in children for job_id in child.deregister()]
        return released + self.deregister()

    def deregister(self, claims_error=None, never_started=()):
        """Delete this row; release its claims to ready, or fail them with an error.

        With an error, claims whose runs never started still go back to
        ready, counting no attempt: those the database has not seen marked
        started (ClaimedExecution.mark_started), and ``never_started``, the
        jobs its supervisor knows it never started (its shared memory).
        Returns the ids of the jobs whose claims were released, or, with an
        error, failed. The row is locked first: a claim takes a
        shared lock on its process's row (see ReadyExecution.objects.claim),
        so no claim can commit between the claims being resolved here and the
        row being deleted, which would leave it held by nobody.
        """
        db = self._state.db
        rows = type(self).objects.using(db).filter(pk=self.pk)
        workers = {self.pk: self.name}
        with atomic(using=db):
            # Locked by a write on SQLite: a transaction that began by
            # reading could not wait for another writer ("database is
            # locked" at once) and would leave the claims held until a retry.
            if not rows.lock_rows():
                return []  # deregistered meanwhile, by whoever locked it first
            if claims_error is None:
                job_ids = self.claims().release_all(worker_ids_by_process=workers)
            else:
                # Job by job: one row that cannot be written must not keep
                # the others (and this row) from being resolved.
                jobs = self.claims().resolve_with(
                    claims_error,
                    worker_ids_by_process=workers,
                    never_started=never_started,
                )
                job_ids = [job.pk for job in jobs]
            # The runs it was still making of cancelled jobs end with it.
            self.cancelled_runs().stopped()
            rows.delete()
        return job_ids


def is_running(pid):
    """Whether a process with this PID runs in this PID namespace (another
    user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@functools.cache
def pid_namespace():
    """The machine's boot and the PID namespace of this process, as
    ``"<boot id>:<namespace inode>"``, or None where /proc cannot tell them.

    Processes that share it see each other's PIDs; a hostname alone does not
    say as much (two containers may share one, each with its own PIDs).
    """
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        inode = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None
    return f"{boot}:{inode}"


def succeeded_outcome(job, run, worker_id):
    """The Outcome of a run its worker reported succeeded (SucceededRun)."""
    return Outcome(
        job=job,
        worker_id=worker_id,
        claimed_at=datetime.fromtimestamp(run.claimed_at, UTC),
        finished_at=datetime.fromtimestamp(run.finished_at, UTC),
        succeeded=True,
        return_value=run.return_value,
        uses_steps=run.uses_steps,
    )


def describe_version(version):
    """A code version as a sentence names it; "" is a release that records none."""
    return repr(version) if version else "an unrecorded version (an older release)"
