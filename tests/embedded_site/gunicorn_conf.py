"""Gunicorn's config file for the embedded site, as docs/deployment.rst shows it."""

from steady_queue.embedded.gunicorn import on_exit, when_ready  # noqa: F401

workers = 2
# Tests start several gunicorns side by side: no shared control socket.
control_socket_disable = True
# Web workers notice a killed arbiter within this (and requests here are quick).
timeout = 4
