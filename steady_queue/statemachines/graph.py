"""StateGraph: a model's states, each with its handler, retry interval,
timeout and kind."""

from datetime import timedelta

from ..durations import parse_duration

# Seconds between tries of a handler that did not move its row on.
DEFAULT_TRY_INTERVAL = 60.0
# A state without a timeout of its own gives its handler this share of the
# runner's lease: the rest is the runner's time to record the timeout before
# the lease ends.
DEFAULT_TIMEOUT_SHARE = 0.8


class State:
    """One state of a StateGraph.

    A state either runs a handler (the default: its rows are picked up as soon
    as they enter it, and again ``try_interval`` after each try that did not
    move them on), is ``terminal`` (nothing more happens), or is
    ``externally_progressed`` (rows wait there until code moves them, with
    ``transition_perform``).

    A handler running longer than ``timeout`` counts as a failed try; None
    gives it DEFAULT_TIMEOUT_SHARE of the runner's lease.
    """

    def __init__(
        self,
        try_interval=DEFAULT_TRY_INTERVAL,
        *,
        timeout=None,
        terminal=False,
        externally_progressed=False,
        initial=False,
    ):
        if terminal and externally_progressed:
            raise ValueError(
                "A state is terminal or externally progressed, not both: a "
                "terminal state never changes, an externally progressed one "
                "waits for code to move it."
            )
        if timeout is not None and (terminal or externally_progressed):
            raise ValueError(
                "A terminal or externally progressed state runs no handler, so "
                "it takes no timeout."
            )
        self.try_interval = seconds_of(try_interval, "try_interval")
        self.timeout = None if timeout is None else seconds_of(timeout, "timeout")
        self.terminal = terminal
        self.externally_progressed = externally_progressed
        self.initial = initial
        self.handler_function = None
        self.name = None
        self.graph = None

    def __set_name__(self, owner, name):
        self.name = name
        self.graph = owner

    def handler(self, function):
        """Decorator: run ``function(instance)`` for rows in this state.

        It returns the next state (a State of the same graph, or its name) to
        move the row there, or None to try again after ``try_interval``.
        """
        if not self.runs_handler:
            kind = "terminal" if self.terminal else "externally progressed"
            raise TypeError(
                f"{self.qualified_name} is {kind}: no handler runs in it. Declare "
                "it State(...) without terminal/externally_progressed to give "
                "it one."
            )
        if self.handler_function is not None:
            raise TypeError(
                f"{self.qualified_name} already has a handler, "
                f"{self.handler_function.__qualname__}."
            )
        self.handler_function = function
        return function

    @property
    def runs_handler(self):
        return not (self.terminal or self.externally_progressed)

    def timeout_under(self, lease):
        """Seconds the handler may run for a runner whose lease is ``lease``."""
        if self.timeout is not None:
            return self.timeout
        return lease * DEFAULT_TIMEOUT_SHARE

    @property
    def qualified_name(self):
        graph = self.graph.__name__ if self.graph else "?"
        return f"{graph}.{self.name}"

    def __str__(self):
        return self.name

    def __repr__(self):
        return f"<State {self.qualified_name}>"


def seconds_of(value, name):
    """Positive seconds for a duration given as a number, a timedelta or a text."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, str):
        seconds = parse_duration(value)
    else:
        seconds = float(value)
    if seconds <= 0:
        raise ValueError(f"{name} must be positive, got {value!r}.")
    return seconds


class StateGraph:
    """Subclass and declare States as class attributes, in order; the first,
    or the one marked ``initial=True``, is where new rows start."""

    states: dict = {}
    initial_state: State | None = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.states = {
            name: value for name, value in vars(cls).items() if isinstance(value, State)
        }
        if not cls.states:
            raise TypeError(f"{cls.__name__} declares no State attributes.")
        marked = [state for state in cls.states.values() if state.initial]
        if len(marked) > 1:
            names = ", ".join(state.name for state in marked)
            raise TypeError(f"{cls.__name__} marks several initial states: {names}.")
        cls.initial_state = marked[0] if marked else next(iter(cls.states.values()))

    @classmethod
    def get(cls, state):
        """The State for a State or a state name; ValueError if not in the graph."""
        name = state.name if isinstance(state, State) else state
        found = cls.states.get(name)
        if found is None or (isinstance(state, State) and state is not found):
            raise ValueError(
                f"{state!r} is not a state of {cls.__name__} "
                f"(its states: {', '.join(cls.states)})."
            )
        return found

    @classmethod
    def choices(cls):
        return [(name, name.replace("_", " ")) for name in cls.states]

    @classmethod
    def missing_handlers(cls):
        """The states that should run a handler but have none registered."""
        return [
            state
            for state in cls.states.values()
            if state.runs_handler and state.handler_function is None
        ]
