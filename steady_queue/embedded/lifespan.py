"""EmbeddedLifespan: an ASGI wrapper whose lifespan starts and stops the supervisor.

Every scope but ``lifespan`` goes to the wrapped application untouched. The
lifespan's startup and shutdown are passed on to the application too, when
it speaks the protocol; Django's own ASGIHandler does not (it raises on any
scope but http), and then the wrapper answers the server alone.
"""

import asyncio
import logging

from ..processes.db import close_quietly
from .in_process import InProcessSupervisor

logger = logging.getLogger("steady_queue")


class EmbeddedLifespan:
    """An ASGI application: ``application`` plus an in-process supervisor."""

    def __init__(self, application, backend="default"):
        self.application = application
        self.embedded = InProcessSupervisor(backend)
        # Whether the server started a lifespan; said once if it did not.
        self.lifespan_started = self.warned = False

    async def __call__(self, scope, receive, send):
        if scope["type"] != "lifespan":
            if not (self.lifespan_started or self.warned):
                self.warned = True
                logger.warning(
                    "steady_queue: this server sent no ASGI lifespan startup, so "
                    "no supervisor runs in it (uvicorn: --lifespan on); run "
                    "manage.py steady_queue beside it instead"
                )
            return await self.application(scope, receive, send)
        self.lifespan_started = True
        return await self.lifespan(scope, receive, send)

    async def lifespan(self, scope, receive, send):
        await receive()  # lifespan.startup
        inner = InnerLifespan(self.application, scope)
        failure = await inner.send("lifespan.startup")
        if failure is None:
            try:
                # Its first queries (is the database migrated?) block: not on
                # the event loop.
                await asyncio.to_thread(self.start_supervisor)
            except Exception as error:
                failure = f"steady_queue's supervisor did not start: {error}"
                await inner.send("lifespan.shutdown")
        if failure is not None:
            await send({"type": "lifespan.startup.failed", "message": failure})
            return
        await send({"type": "lifespan.startup.complete"})
        await receive()  # lifespan.shutdown
        # The application's own shutdown first: it may enqueue a last job.
        failure = await inner.send("lifespan.shutdown")
        # A graceful stop: up to shutdown_timeout for running jobs. The server
        # accepts no request meanwhile; the loop stays free for those open.
        await asyncio.to_thread(self.embedded.stop)
        if failure is not None:
            await send({"type": "lifespan.shutdown.failed", "message": failure})
        else:
            await send({"type": "lifespan.shutdown.complete"})

    def start_supervisor(self):
        try:
            self.embedded.start()
        finally:
            # A thread of asyncio's pool: the connection its checks opened
            # would stay open, unused, for the server's whole life.
            close_quietly()


class InnerLifespan:
    """The wrapped application's side of the lifespan, run as a task.

    An application that raises before it answers the startup does not speak
    the protocol (the ASGI spec lets it): from then on it is left out.
    """

    def __init__(self, application, scope):
        self.inbox = asyncio.Queue()
        self.outbox = asyncio.Queue()
        self.task = asyncio.ensure_future(
            application(scope, self.inbox.get, self.outbox.put)
        )
        self.speaks_lifespan = True

    async def send(self, event):
        """Pass ``event`` on and wait for the answer; return the failure
        message if the application reported one, else None."""
        if not self.speaks_lifespan:
            return None
        await self.inbox.put({"type": event})
        answer = asyncio.ensure_future(self.outbox.get())
        await asyncio.wait({answer, self.task}, return_when=asyncio.FIRST_COMPLETED)
        if not answer.done():
            answer.cancel()
            self.speaks_lifespan = False
            if not self.task.cancelled() and self.task.exception() is not None:
                # Django's handler and most frameworks without a lifespan
                # raise here: that means "not supported", not a failure.
                logger.debug(
                    "the ASGI application does not handle the lifespan: %r",
                    self.task.exception(),
                )
            return None
        message = answer.result()
        if message["type"].endswith(".failed"):
            return message.get("message", "") or f"{event} failed"
        return None
