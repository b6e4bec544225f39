"""The soak harness's Django project: settings, the tasks it runs, and its poisons."""
