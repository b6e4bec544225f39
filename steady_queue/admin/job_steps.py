"""What a job's page shows of its durable steps and of what it waits for."""

import json
from dataclasses import dataclass
from datetime import datetime

from django.utils.translation import ngettext

from ..models import Step, Wait
from ..pipeline.outcome import FOREVER
from ..pipeline.return_values import json_return_value
from ..reporting.numbers import count_text

# A stored value longer than this is cut on the page (the row keeps it whole).
SHOWN_VALUE_CHARS = 2000


@dataclass(frozen=True, slots=True, kw_only=True)
class ShownStep:
    """One stored step: its name, kind, value as JSON text, and when it finished."""

    name: str
    kind: str
    value: str
    finished_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class ShownWait:
    """What a parked job waits for: an event (until a timeout, or for ever),
    or the end of a durable sleep."""

    step_name: str
    event_name: str | None
    until: datetime | None
    since: datetime


def steps_and_wait(job):
    """The context job/change_form.html shows the steps and the wait from."""
    database = job._state.db
    steps = Step.objects.using(database).of_job(job.pk)
    wait = Wait.objects.using(database).filter(job_id=job.pk).first()
    return {
        "sq_steps": [
            ShownStep(
                name=step.name,
                kind=step.kind,
                value=shown_value(step.value),
                finished_at=step.finished_at,
            )
            for step in steps
        ],
        "sq_wait": wait
        and ShownWait(
            step_name=wait.step_name,
            event_name=wait.event_name,
            until=None if wait.until in (None, FOREVER) else wait.until,
            since=wait.created_at,
        ),
    }


def shown_value(value):
    """A stored value as JSON text for a page, cut past SHOWN_VALUE_CHARS."""
    text = json.dumps(json_return_value(value), sort_keys=True, default=str)
    if len(text) > SHOWN_VALUE_CHARS:
        cut = len(text) - SHOWN_VALUE_CHARS
        more = ngettext(
            "(%(count)s more character)", "(%(count)s more characters)", cut
        ) % {"count": count_text(cut)}
        return f"{text[:SHOWN_VALUE_CHARS]} … {more}"
    return text
