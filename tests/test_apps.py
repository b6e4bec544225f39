"""The app's loading: our models are imported with the collector paused
(docs/performance.rst, "Boot")."""

import gc

from django.apps import apps


def test_the_collector_runs_again_once_our_models_are_imported():
    # Idempotent: the models modules are loaded already.
    apps.get_app_config("steady_queue").import_models()

    assert gc.isenabled()


def test_a_collector_the_project_turned_off_stays_off():
    gc.disable()
    try:
        apps.get_app_config("steady_queue").import_models()

        assert not gc.isenabled()
    finally:
        gc.enable()
