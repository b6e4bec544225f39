"""A call's path from enqueue to outcome, with no model in it.

arguments encodes and decodes what a call carries (signing signs model
references); loader finds the task a row names; open_batch is the batch an
enqueue joins; runner calls the task; outcome checks what it produced; results
builds TaskResults from rows.
"""
