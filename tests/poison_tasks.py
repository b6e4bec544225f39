"""Tasks whose outcomes a database cannot store as they are."""

from steady_queue.compat import task


@task
def returns_nan():
    return {"ratio": float("nan")}


@task
def returns_nul():
    return "before\x00after"


@task
def returns_lone_surrogate():
    return "broken \ud800 text"


@task
def returns_too_much():
    return "x" * (2 * 1024 * 1024)


@task
def returns_deep_nesting():
    value = []
    for _ in range(5_000):
        value = [value]
    return value


@task
def raises_with_nul():
    raise ValueError("bad byte \x00 in the message \ud800")
