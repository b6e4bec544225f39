"""The runtime: supervisor, workers and dispatchers. They decide when; models, how."""
