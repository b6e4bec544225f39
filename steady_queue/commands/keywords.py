"""Options given as keywords to call_command(), read as the command line would.

call_command("steady_queue", "retry", queue="mail", id=3) hands its keywords
over unparsed: a number arrives as a string or an int instead of through the
option's reader, --id's one value instead of its list, an option of another
subcommand unnoticed. read_keywords() runs each value through its option's
reader, so both forms give a subcommand the same options.
"""

import argparse
from datetime import timedelta

from django.core.management.base import CommandError


def read_keywords(name, parser, subparser, options, stealth):
    """Return ``options`` with each value read as its option reads text.

    ``parser`` is the top-level parser, ``subparser`` the one of the
    subcommand ``name``, ``stealth`` the option names call_command() takes
    that no parser declares (stdout, stderr, skip_checks).
    """
    actions = {
        action.dest: action
        for each in (parser, subparser)
        for action in each._actions
        if action.dest is not argparse.SUPPRESS
    }
    foreign = sorted(set(options) - set(actions) - set(stealth))
    if foreign:
        given = ", ".join(f"{option}=" for option in foreign)
        raise CommandError(
            f"`manage.py steady_queue {name}` takes no option {given} (given "
            f"as a keyword); see `manage.py steady_queue {name} --help`."
        )
    return {
        name: read_value(actions[name], value) if name in actions else value
        for name, value in options.items()
    }


def read_value(action, value):
    """Read one keyword's value as ``action`` reads its text on the command line."""
    if value is None:
        return value  # left out
    if action.nargs == "?" and value is True and action.const is not None:
        return action.const  # --watch given alone
    if isinstance(action, argparse._AppendAction):
        values = value if isinstance(value, list | tuple) else [value]
        return [read_one(action, each) for each in values]
    return read_one(action, value)


def read_one(action, value):
    """Pass a string or a number through the option's reader and choices."""
    if isinstance(value, timedelta):
        value = value.total_seconds()
    readable = isinstance(value, str | int | float) and not isinstance(value, bool)
    if action.type is not None and readable:
        try:
            value = action.type(str(value))
        except argparse.ArgumentTypeError as error:
            raise CommandError(f"{option_name(action)}: {error}") from error
        except (TypeError, ValueError) as error:
            kind = getattr(action.type, "__name__", "")
            raise CommandError(
                f"{option_name(action)}: invalid {kind} value: {value!r}."
            ) from error
    if action.choices is not None and value not in action.choices:
        choices = ", ".join(repr(choice) for choice in action.choices)
        raise CommandError(f"{option_name(action)}: {value!r} is not one of {choices}.")
    return value


def option_name(action):
    return max(action.option_strings, key=len, default=action.dest)
