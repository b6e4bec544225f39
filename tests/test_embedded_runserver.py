"""Which runserver process starts an embedded supervisor, and for which backend
(tests/integration/test_embedded.py runs one for real)."""

import pytest
from django.utils import autoreload

from steady_queue.embedded.runserver import (
    SETTING,
    configured_backend,
    is_reloader_parent,
    serves_requests,
)


@pytest.mark.parametrize(
    ("argv", "reloaded_child", "serves"),
    [
        (["manage.py", "runserver"], False, False),  # the reloader's parent
        (["manage.py", "runserver"], True, True),  # its child
        (["manage.py", "runserver", "--noreload"], False, True),
        (["manage.py", "steady_queue"], True, False),
        (["manage.py", "migrate"], False, False),
        (["manage.py"], False, False),
    ],
)
def test_only_the_process_that_serves_starts_one(
    argv, reloaded_child, serves, monkeypatch
):
    if reloaded_child:
        monkeypatch.setenv(autoreload.DJANGO_AUTORELOAD_ENV, "true")
    else:
        monkeypatch.delenv(autoreload.DJANGO_AUTORELOAD_ENV, raising=False)
    assert serves_requests(argv) is serves
    # The autoreloader's parent cleans up after a child it killed (Ctrl-C).
    parent = argv[1:2] == ["runserver"] and not serves
    assert is_reloader_parent(argv) is parent


@pytest.mark.parametrize(
    ("setting", "variable", "alias"),
    [
        (None, None, None),
        (True, None, "default"),
        (False, None, None),
        ("separate", None, "separate"),
        (None, "1", "default"),
        (None, "separate", "separate"),
        # The environment wins over the setting, both ways.
        (True, "0", None),
        (False, "true", "default"),
    ],
)
def test_the_setting_or_the_environment_turns_it_on(
    setting, variable, alias, settings, monkeypatch
):
    if setting is not None:
        setattr(settings, SETTING, setting)
    if variable is None:
        monkeypatch.delenv(SETTING, raising=False)
    else:
        monkeypatch.setenv(SETTING, variable)
    assert configured_backend() == alias
