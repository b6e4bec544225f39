"""What operators read: queue overviews, throughput, status, metrics, charts.

Everything here is read from the database when asked for; no process keeps
counters in memory.
"""
