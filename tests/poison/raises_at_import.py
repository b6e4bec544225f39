"""A task module whose import raises: the job must fail, not the worker."""

raise RuntimeError("this module cannot be imported")
