# cython: language_level=3, binding=False
"""The one thing of the cyclic collector Python does not offer: taking an object out of its
view (see proton_broker/collector.py, which owns the rules)."""

cdef extern from "Python.h":
    int PyObject_GC_IsTracked(object)
    void PyObject_GC_UnTrack(void *)


def untrack(object obj):
    """Take ``obj`` out of the collector's view, if it is in it (any object may be passed:
    one the collector does not follow, such as bytes, is left alone)."""
    if PyObject_GC_IsTracked(obj):
        PyObject_GC_UnTrack(<void *>obj)
