"""A job's path through a worker: arguments in, task loaded, run, outcome out.

arguments encodes and decodes what a call carries; loader finds the task a row
names; queue_selector orders the queues a worker claims from; runner calls the
task; outcome checks what it produced; results builds TaskResults from rows.
"""
