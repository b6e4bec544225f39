"""The subcommands of manage.py steady_queue, one module each.

Every module names its subcommand (``NAME``), gives its one-line ``HELP``,
and exposes ``add_arguments(parser)`` and ``handle(command, options)``, where
``command`` is the running management command (for its stdout and stderr).
"""
