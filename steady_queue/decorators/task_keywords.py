"""Per-task settings as ``@task(...)`` keywords (Django 6.1 passes a task's
extra keywords to its backend's ``task_class``).

Each keyword is its decorator's arguments, and sets what the decorator sets::

    @task(retry=5, timeout="30s", limits_concurrency={"to": 1, "key": "account"})
    def charge(account): ...

is ``@retry(5)``, ``@timeout("30s")`` and ``@limits_concurrency(to=1,
key="account")`` stacked on ``@task``. A value is the decorator's first
argument, a dict of its keyword arguments, or (``limits_concurrency`` and
``limits_rate``, which stack) a list of such dicts.
"""

from dataclasses import dataclass, field, fields

from django.utils.module_loading import import_string

from ..compat import Task
from .concurrency import limits_concurrency
from .debounce import debounce
from .fair import fair
from .rate import limits_rate
from .retries import retry
from .timeouts import timeout
from .unique import unique


def _called(decorator, value):
    """The decorator for a keyword's value: True for its defaults, keywords
    from a dict, else its first argument."""
    if value is True:
        return decorator()
    if isinstance(value, dict):
        return decorator(**value)
    if decorator is unique:
        raise TypeError(
            f"unique takes True or a dict of @unique's keywords; got {value!r}."
        )
    return decorator(value)


def _stacked(decorator):
    def decorators(value):
        values = value if isinstance(value, list | tuple) else [value]
        if not values:
            raise ValueError("an empty list sets no limit: leave the keyword out.")
        return [_called(decorator, one) for one in values]

    return decorators


# Each keyword, and how its value becomes the decorators it stands for.
KEYWORDS = {
    "retry": lambda value: [_called(retry, value)],
    "timeout": lambda value: [timeout(value)],
    "unique": lambda value: [_called(unique, value)],
    "limits_concurrency": _stacked(limits_concurrency),
    "limits_rate": _stacked(limits_rate),
    "debounce": lambda value: [_called(debounce, value)],
    "fair": lambda value: [_called(fair, value)],
}


class _Unset:
    """What a keyword left unset holds: None is a value (timeout=None turns
    the backend's default off)."""

    def __repr__(self):
        return "UNSET"

    def __reduce__(self):
        return "UNSET"


UNSET = _Unset()
# Task fields @task() does not take as keywords.
NOT_KEYWORDS = {"func", "run_after"}
# Set on the function with the keywords already applied to it: Task.using()
# and unpickling build the Task again, and a stacking limit must not stack
# twice.
APPLIED = "__steady_queue_task_keywords__"


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
class SteadyTask(Task):
    """django.tasks' Task, taking steady_queue's settings as keywords."""

    # Left out of == and hash(): a dict is not hashable, and the settings
    # live on the function, which equal tasks share.
    retry: object = field(default=UNSET, compare=False, repr=False)
    timeout: object = field(default=UNSET, compare=False, repr=False)
    unique: object = field(default=UNSET, compare=False, repr=False)
    limits_concurrency: object = field(default=UNSET, compare=False, repr=False)
    limits_rate: object = field(default=UNSET, compare=False, repr=False)
    debounce: object = field(default=UNSET, compare=False, repr=False)
    fair: object = field(default=UNSET, compare=False, repr=False)

    def __init__(self, **options):
        """Refuse an unknown keyword by name, listing the ones there are;
        then build the Task, its settings applied before Django validates it."""
        known = {one.name for one in fields(self)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(
                f"@task() got unexpected keyword argument(s) {', '.join(unknown)}. "
                f"steady_queue takes {', '.join(KEYWORDS)}; Django's Task takes "
                f"{', '.join(sorted(known - set(KEYWORDS) - NOT_KEYWORDS))}."
            )
        for name in KEYWORDS:
            object.__setattr__(self, name, options.pop(name, UNSET))
        Task.__init__(self, **options)

    def __post_init__(self):
        given = {
            name: getattr(self, name)
            for name in KEYWORDS
            if getattr(self, name) is not UNSET
        }
        if given and getattr(self.func, APPLIED, None) != given:
            for name, value in given.items():
                try:
                    # Last first: a list reads top-down, as stacked decorators.
                    for decorator in reversed(KEYWORDS[name](value)):
                        decorator(self.func)
                except (TypeError, ValueError) as error:
                    raise type(error)(f"@task({name}=...): {error}") from None
            setattr(self.func, APPLIED, given)
        Task.__post_init__(self)

    def __reduce__(self):
        # Unpickled by importing the task again, whose import applied the
        # keywords to its function: leave them (and their key callables)
        # out. Django's Task pickles so; the backport's has no __reduce__.
        arguments = {
            one.name: getattr(self, one.name)
            for one in fields(self)
            if one.name not in KEYWORDS
        }
        arguments["func"] = self.module_path
        return _unpickled, (type(self), arguments)


def _unpickled(task_class, arguments):
    """A pickled task again: its function is the one its module's task has."""
    arguments["func"] = import_string(arguments["func"]).func
    return task_class(**arguments)
