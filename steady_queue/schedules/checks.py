"""System checks for a backend's recurring tasks (ids steady_queue.E010-E017)."""

from django.core import checks

from .specs import static_specs
from .validation import duplicate_keys, problems


def check_recurring(options):
    """Return an Error per problem with the static tasks a backend's scheduler runs."""
    specs = static_specs(options)
    found = [problem for spec in specs for problem in problems(spec)]
    found.extend(duplicate_keys(specs))
    return [checks.Error(message, hint=hint, id=id) for id, message, hint in found]
