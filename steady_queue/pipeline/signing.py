"""Signs the stored values that name models, so a row changed by hand is caught.

A model tag names its model by label and primary key, and the worker loads
that row before calling the task: a row rewritten outside steady_queue could
make it load any installed model (``auth.User``, say). Arguments holding model
tags carry an HMAC of their args and kwargs, keyed from SECRET_KEY; the worker
checks it before loading anything. A return value that names a model is
signed the same way (return_values.py). Rows without model tags are not signed.
"""

import hmac
import json

from django.conf import settings
from django.utils.crypto import salted_hmac

SIGNATURE = "signature"
SALT = "steady_queue.pipeline.signing.arguments"


RETURN_VALUE_SALT = "steady_queue.pipeline.signing.return_value"


def signature_of(stored, secret=None):
    """The HMAC (hex) of stored arguments' args and kwargs."""
    return _signature(SALT, [stored.get("args", []), stored.get("kwargs", {})], secret)


def return_value_signature(value, secret=None):
    """The HMAC (hex) of a stored return value that names a model."""
    return _signature(RETURN_VALUE_SALT, value, secret)


def holds_valid_signature(stored, sign=signature_of):
    """Whether the stored signature was made with SECRET_KEY or a fallback.

    ``sign(stored, secret)`` makes the signature ``stored`` should carry.
    """
    found = stored.get(SIGNATURE)
    if not isinstance(found, str):
        return False
    secrets = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    return any(hmac.compare_digest(found, sign(stored, secret)) for secret in secrets)


def _signature(salt, value, secret):
    # Canonical JSON: the row's JSON column may reorder keys (PostgreSQL's
    # jsonb does) or respace them; the signed text must not change with it.
    payload = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return salted_hmac(salt, payload, secret=secret, algorithm="sha256").hexdigest()
