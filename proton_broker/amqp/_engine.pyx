# cython: language_level=3, boundscheck=False, wraparound=False, binding=False
"""The engine calls of the hot path, compiled: what :mod:`proton_broker.amqp.engine` does
in Python, each a single call that makes its engine calls without releasing the GIL.

Why: every call into Proton's engine through cffi releases the GIL and takes it back (two
mutex round trips, errno saved and restored), about 75 ns over a plain Python call, and a
message made about 26 of them (docs/performance.md). A call here costs about what a call of
a built-in function costs, and the transfer steps make several engine calls in one.

Rules owned here:

* Each function answers exactly as its Python twin in ``engine.py`` does (for the single
  engine calls, the cffi function itself); ``tests/amqp/test_engine.py`` drives both over
  real links.
* An engine call is a direct C call through the function's address, which cffi gives
  (``ffi.addressof(lib, name)``): the same engine, the same copy of the library. The
  engine functions called here never block and never call back into Python, so holding
  the GIL through them is safe.
* An engine object arrives as the cffi pointer object Python code holds, and its address is
  read from the object's ``c_data`` field. :func:`use_engine` checks that reading against
  cffi's own answer for a live object, and refuses (ValueError) where they differ: the
  package then keeps the Python twins. A function given anything but a pointer object of
  that type raises TypeError, and given a null pointer ValueError, before any engine call.
* Until :func:`use_engine` succeeded every function raises RuntimeError.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport uint64_t, uintptr_t


cdef extern from *:
    """
    /* cffi's pointer object (CDataObject in _cffi_backend): its head, type, address. */
    typedef struct { PyObject_HEAD void *c_type; char *c_data; } _pb_cdata;
    #define _PB_ADDRESS(o) ((void *)(((_pb_cdata *)(o))->c_data))
    """
    void *_PB_ADDRESS(object o)

ctypedef bint (*_test_f)(void *) noexcept nogil
ctypedef size_t (*_size_f)(void *) noexcept nogil
ctypedef int (*_int_f)(void *) noexcept nogil
ctypedef uint64_t (*_u64_f)(void *) noexcept nogil
ctypedef Py_ssize_t (*_recv_f)(void *, char *, size_t) noexcept nogil
ctypedef Py_ssize_t (*_send_f)(void *, const char *, size_t) noexcept nogil
ctypedef void (*_update_f)(void *, uint64_t) noexcept nogil
ctypedef void (*_void_f)(void *) noexcept nogil

cdef _test_f _readable = NULL, _partial = NULL, _aborted = NULL, _settled = NULL, _advance = NULL
cdef _size_f _pending = NULL
cdef _recv_f _recv = NULL
cdef _send_f _send = NULL
cdef _update_f _update = NULL
cdef _void_f _settle = NULL, _pop = NULL
cdef _int_f _event_type = NULL
cdef _u64_f _remote_state = NULL
cdef type _pointer_type = None

# What transfer_size answers for a transfer that is not complete (its Python twin's names).
NOT_READABLE = -1
PARTIAL = -2
ABORTED = -3
cdef uint64_t _ACCEPTED = 0x24  # PN_ACCEPTED


def use_engine(ffi, lib):
    """Take the engine functions' addresses from cffi's ``ffi`` and ``lib``, after checking
    that a pointer object's address is read as cffi reads it (see the module rules)."""
    global _readable, _partial, _aborted, _settled, _advance, _pending, _recv, _send
    global _update, _settle, _pop, _event_type, _remote_state, _pointer_type
    probe = lib.pn_connection()
    try:
        expected = int(ffi.cast("uintptr_t", probe))
        if <uintptr_t>_PB_ADDRESS(probe) != <uintptr_t>expected:
            raise ValueError("cffi's pointer objects are laid out differently")
        kind = type(probe)
    finally:
        lib.pn_decref(probe)
    _readable = <_test_f>_function(ffi, lib, "pn_delivery_readable")
    _partial = <_test_f>_function(ffi, lib, "pn_delivery_partial")
    _aborted = <_test_f>_function(ffi, lib, "pn_delivery_aborted")
    _settled = <_test_f>_function(ffi, lib, "pn_delivery_settled")
    _advance = <_test_f>_function(ffi, lib, "pn_link_advance")
    _pending = <_size_f>_function(ffi, lib, "pn_delivery_pending")
    _recv = <_recv_f>_function(ffi, lib, "pn_link_recv")
    _send = <_send_f>_function(ffi, lib, "pn_link_send")
    _update = <_update_f>_function(ffi, lib, "pn_delivery_update")
    _settle = <_void_f>_function(ffi, lib, "pn_delivery_settle")
    _pop = <_void_f>_function(ffi, lib, "pn_collector_pop")
    _event_type = <_int_f>_function(ffi, lib, "pn_event_type")
    _remote_state = <_u64_f>_function(ffi, lib, "pn_delivery_remote_state")
    _pointer_type = kind


cdef void *_function(ffi, lib, str name) except NULL:
    """The address of the engine function ``name``, as cffi has it."""
    cdef uintptr_t address = int(ffi.cast("uintptr_t", ffi.addressof(lib, name)))
    if address == 0:
        raise ValueError(f"no address for {name}")
    return <void *>address


cdef inline void *_address(object pointer) except NULL:
    if type(pointer) is not _pointer_type:
        if _pointer_type is None:
            raise RuntimeError("use_engine was not called")
        raise TypeError(f"an engine pointer, not {type(pointer).__name__}")
    cdef void *address = _PB_ADDRESS(pointer)
    if address == NULL:
        raise ValueError("a null engine pointer")
    return address


# ---- single engine calls ------------------------------------------------------------------

def event_type(event):
    """``pn_event_type``."""
    return _event_type(_address(event))


def pop(collector):
    """``pn_collector_pop``."""
    _pop(_address(collector))


def remote_state(dlv):
    """``pn_delivery_remote_state``."""
    return _remote_state(_address(dlv))


def settled(dlv):
    """``pn_delivery_settled``."""
    return _settled(_address(dlv))


def settle(dlv):
    """``pn_delivery_settle``."""
    _settle(_address(dlv))


# ---- a transfer's steps -------------------------------------------------------------------

def transfer_size(dlv):
    """The size of a complete transfer's bytes, or NOT_READABLE, PARTIAL or ABORTED."""
    cdef void *d = _address(dlv)
    if not _readable(d):
        return NOT_READABLE
    if _partial(d):
        return PARTIAL
    if _aborted(d):
        return ABORTED
    return <Py_ssize_t>_pending(d)


def take(link, Py_ssize_t size):
    """The current transfer's ``size`` bytes, read into a new bytes object; the link moves
    on to its next transfer."""
    cdef void *l = _address(link)
    cdef object data = PyBytes_FromStringAndSize(NULL, size)
    cdef Py_ssize_t got = _recv(l, PyBytes_AS_STRING(data), <size_t>size)
    _advance(l)
    if got < size:  # the engine had less (never, for a complete transfer's size)
        return data[:got if got > 0 else 0]
    return data


def accept(dlv):
    """Settle the transfer accepted (just settle it where the producer settled it)."""
    cdef void *d = _address(dlv)
    if not _settled(d):
        _update(d, _ACCEPTED)
    _settle(d)


cdef class Tally:
    """The bytes a consumer has sent, and at how many its backlog is next looked at."""

    cdef public long long handed
    cdef public long long due

    def __init__(self, long long due):
        self.handed = 0
        self.due = due


def send_with(link, bytes data, Py_ssize_t at, bytes section, Tally tally not None):
    """Send ``data`` with ``section`` inserted at offset ``at`` as the link's current
    delivery, whole, and move on to the next: three appends to the delivery, where joining
    the pieces first made a copy of the message. The bytes sent count in ``tally``; whether
    they reached its ``due``."""
    if at < 0 or at > PyBytes_GET_SIZE(data):
        raise ValueError(f"offset {at} is outside the message")
    cdef void *l = _address(link)
    cdef const char *bytes_ = PyBytes_AS_STRING(data)
    cdef Py_ssize_t extra = PyBytes_GET_SIZE(section)
    _send(l, bytes_, <size_t>at)
    _send(l, PyBytes_AS_STRING(section), <size_t>extra)
    _send(l, bytes_ + at, <size_t>(PyBytes_GET_SIZE(data) - at))
    _advance(l)
    tally.handed += PyBytes_GET_SIZE(data) + extra
    return tally.handed >= tally.due
