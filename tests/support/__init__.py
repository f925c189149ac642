"""Helpers the tests of several folders share (tests/ is on pytest's pythonpath: ``from support.records import make_trace``)."""
