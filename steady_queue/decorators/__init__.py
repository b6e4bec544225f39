"""Per-task settings: @limits_concurrency, @retry, @timeout, @unique, on_commit.

Each decorator stores its settings on the task's function (task_settings), so
``Task.using()`` copies keep them; the backend and workers read them back.
"""
