"""Embedded mode: the supervisor inside the web server, for one-process sites.

``asgi(application)`` wraps an ASGI application so that the server's lifespan
starts and stops the supervisor; ``steady_queue.embedded.gunicorn`` holds
Gunicorn's hooks; ``STEADY_QUEUE_EMBEDDED_RUNSERVER`` makes ``runserver`` start
it (``steady_queue.embedded.runserver``). docs/deployment.rst, "Embedded mode",
says when not to use it.
"""


def asgi(application, backend="default"):
    """``application`` with a thread-mode supervisor of ``backend`` (an alias of
    TASKS) started at the server's lifespan startup and stopped at its shutdown.
    """
    # Imported when called, once Django is set up: Gunicorn's config file
    # imports steady_queue.embedded.gunicorn (and so this package) before the
    # app registry is ready, and the lifespan reaches the models.
    from .lifespan import EmbeddedLifespan

    return EmbeddedLifespan(application, backend)
