"""Models the suite needs of its own: a StatorModel for the state machines."""

import asyncio
import threading

from django.db import models

from steady_queue.statemachines import State, StateField, StateGraph, StatorModel


class ArticleStates(StateGraph):
    new = State(try_interval=30)
    published = State(try_interval=60)
    archived = State(terminal=True)
    held = State(externally_progressed=True)


class Article(StatorModel):
    title = models.CharField(max_length=100, default="")
    state = StateField(ArticleStates)
    # What the handlers did, for the tests to count.
    published_times = models.PositiveIntegerField(default=0)

    class Meta:
        app_label = "stator_app"


@ArticleStates.new.handler
def publish(article):
    """Counts its runs in the row itself: at least once per entry into new."""
    type(article).objects.filter(pk=article.pk).update(
        published_times=models.F("published_times") + 1
    )
    if article.title == "fails":
        raise RuntimeError("this article cannot be published")
    if article.title == "waits":
        return None
    return ArticleStates.published


@ArticleStates.published.handler
def archive(article):
    return "archived"


class LeafletStates(StateGraph):
    """Article's graph with one-second tries: in the chaos test, the rows a
    killed runner held wait its lease and then one try_interval."""

    new = State(try_interval=1)
    published = State(try_interval=1)
    archived = State(terminal=True)


class Leaflet(StatorModel):
    title = models.CharField(max_length=100, default="")
    state = StateField(LeafletStates)
    published_times = models.PositiveIntegerField(default=0)

    class Meta:
        app_label = "stator_app"


@LeafletStates.new.handler
def publish_leaflet(leaflet):
    """Counts its runs in the row itself: at least once per entry into new."""
    type(leaflet).objects.filter(pk=leaflet.pk).update(
        published_times=models.F("published_times") + 1
    )
    return "published"


LeafletStates.published.handler(archive)


class ParcelStates(StateGraph):
    sent = State(try_interval=30)
    arrived = State(terminal=True)


class Parcel(StatorModel):
    """A StatorModel whose default manager is a plain one, without the verbs."""

    state = StateField(ParcelStates)

    objects = models.Manager()

    class Meta:
        app_label = "stator_app"


@ParcelStates.sent.handler
def arrive(parcel):
    return ParcelStates.arrived


# Set by the tests that start a hanging handler, so its thread ends with them.
RELEASE_HANGING = threading.Event()


class ChoreStates(StateGraph):
    todo = State(try_interval=30, timeout=0.5)
    done = State(terminal=True)


class Chore(StatorModel):
    """A StatorModel whose handler misbehaves as its ``behaviour`` says."""

    behaviour = models.CharField(max_length=20, default="")
    state = StateField(ChoreStates)

    class Meta:
        app_label = "stator_app"


@ChoreStates.todo.handler
def do(chore):
    if chore.behaviour == "hangs":
        RELEASE_HANGING.wait(timeout=60)
    elif chore.behaviour == "exits":
        raise SystemExit(3)
    elif chore.behaviour == "interrupts":
        raise KeyboardInterrupt
    return ChoreStates.done


class ErrandStates(StateGraph):
    """Coroutine handlers: run on the state runner's event loop."""

    # The timeout covers the handler's async ORM write: at 0.5 s, one such
    # write on MariaDB at load 14 ran past it, and a handler meant to fail
    # with its own error was cancelled instead.
    todo = State(try_interval=30, timeout=3)
    done = State(terminal=True)


class Errand(StatorModel):
    """A StatorModel whose (async) handler behaves as its ``behaviour`` says."""

    behaviour = models.CharField(max_length=20, default="")
    state = StateField(ErrandStates)
    # What the handler did, written with the async ORM.
    runs = models.PositiveIntegerField(default=0)

    class Meta:
        app_label = "stator_app"


@ErrandStates.todo.handler
async def run_errand(errand):
    await type(errand).objects.filter(pk=errand.pk).aupdate(runs=models.F("runs") + 1)
    if errand.behaviour == "sleeps":
        await asyncio.sleep(30)
    elif errand.behaviour == "fails":
        raise RuntimeError("this errand cannot be run")
    return ErrandStates.done
