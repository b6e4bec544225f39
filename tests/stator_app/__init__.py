"""A test app with a StatorModel: the app "tests" has no models module
(tests/models is a package of tests)."""
