"""Recurring schedules as declared: phrases and cron, @recurring and
OPTIONS["recurring"], their checks, and when a scheduler enqueues next.

Nothing here touches a model; the runtime API that does is ``recurring``.
"""
