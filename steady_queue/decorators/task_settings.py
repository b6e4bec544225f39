"""Per-task settings that steady_queue's decorators leave on a task's function.

They are set on the function rather than on the Task, so a decorator works
stacked above or below ``@task``, and every ``Task.using()`` copy (which shares
the function) keeps them.
"""

from ..compat import Task


def setting_decorator(name, attribute, value):
    """A decorator that records ``value`` under ``attribute`` on a task's function.

    ``name`` is the decorator's name, for the error when it is misapplied.
    """

    def decorate(target):
        function = target.func if isinstance(target, Task) else target
        if not callable(function):
            raise TypeError(f"@{name} decorates a task or a function, not {target!r}.")
        setattr(function, attribute, value)
        return target

    return decorate


def setting_of(task, attribute, default=None):
    """The value a decorator recorded on this task, or ``default``."""
    return getattr(task.func, attribute, default)
