"""Signs the model tags of stored arguments, bound to their task and places.

A model tag names its model by label and primary key, and the worker loads
that row before calling the task: a row rewritten outside steady_queue could
make it load any installed model (``auth.User``, say), or hand a model that
was enqueued for one task to another. Arguments holding model tags carry an
HMAC, keyed from SECRET_KEY, of the task path and each model tag with its
place in the call; the worker checks it before loading anything. Rows
without model tags are not signed.

Only the model tags are signed, not the whole arguments: a JSON column may
store numbers as other text (PostgreSQL's jsonb reads ``1e16`` back as
``10000000000000000``), and those values load no model. The job's id is not
signed either: the database assigns it after the arguments are written (and
a recurring task's arguments are signed once for all its jobs), so a row's
model arguments copied whole into another job of the same task still read;
they name the same rows, for the same task, in the same places.
"""

import hmac
import json

from django.conf import settings
from django.utils.crypto import salted_hmac

SIGNATURE = "signature"
SALT = "steady_queue.pipeline.signing.model-tags"


def signature_of(task_path, model_tags, secret=None):
    """The HMAC (hex) of a task path and its ``(place, label, pk)`` model tags."""
    # Canonical JSON, in order of place: the row's JSON column may reorder
    # keys (PostgreSQL's jsonb and MySQL do); the signed text must not change.
    payload = json.dumps(
        [task_path, sorted([list(tag) for tag in model_tags], key=lambda t: t[0])],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return salted_hmac(SALT, payload, secret=secret, algorithm="sha256").hexdigest()


def holds_valid_signature(found, task_path, model_tags):
    """Whether ``found`` signs these model tags for ``task_path``, made with
    SECRET_KEY or a fallback."""
    if not isinstance(found, str):
        return False
    secrets = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    return any(
        hmac.compare_digest(found, signature_of(task_path, model_tags, secret))
        for secret in secrets
    )
