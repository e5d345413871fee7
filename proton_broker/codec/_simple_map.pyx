# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, binding=False
"""The codec's two walks over an application-properties map, compiled: the quick check
(what :func:`proton_broker.codec.values.skip_simple_map_python` does) and the lookup of one
key (what :func:`proton_broker.codec.values.find_in_map_python` does), without the
interpreter; and a search within a message's bytes (what
:func:`proton_broker.codec.values.contains_python` does) without ``bytes.find``'s argument
parsing. Its functions are plain built-in functions (``binding=False``, as the collector's
helper): the interpreter calls those by its quicker path for built-ins, where Cython's own
function objects go through a generic call (260 instructions fewer a keyed message).

Rules owned here:

* It answers exactly as the Python walk does: the offset just after the map at ``at`` if
  the map is application properties of the usual kind (string keys, valid UTF-8, each with
  a value of a simple type: fixed width, binary, string or symbol; AMQP 1.0 3.2.5), and -1
  otherwise. Where the bytes end too soon, the Python walk raises IndexError or answers an
  offset past their end (a slice comes back short without complaint) and this returns -1:
  either way the message is refused, the caller walking the map again with its checks,
  which say what is wrong.
  So it only ever makes the usual case quicker, and a test holds the two to the same
  answers on every map it can make (``tests/codec/test_simple_map.py``), as it does the
  two lookups.
* The lookup answers exactly as the Python lookup does, because it answers only its usual
  case itself: the key asked for is the map's first, as a short string (str8), and its value
  a short string that ends within the map; then the value, decoded (None if it is not valid
  UTF-8). Anything else (another key, another type, a symbol key, a long key, a map the
  lookup does not expect) it hands to the Python lookup, given by :func:`use_find`.
* Which constructor starts which kind of value is not written here: :func:`use_steps`
  takes the table the Python walk uses (``values._PROPERTY_STEP``) when ``values`` is
  imported, so the two read one table. A walk asked before ``values`` has handed over its
  table and its lookup raises RuntimeError, naming the call that was missed.
* A search for some bytes within a range of a message (:func:`contains`) answers what
  ``data.find(needle, start, stop) >= 0`` answers, without the argument parsing of
  ``bytes.find``, which cost about 400 of its 1,000 instructions; offsets below zero,
  which ``find`` counts from the end, it hands to ``find``. A queue with a key looks for
  a custom ``x-opt-sequence`` in every keyed message this way.
* :func:`find_unmarked` is the two in one call, as a queue with a key makes them for every
  keyed message (the key's value, and whether a custom ``x-opt-sequence`` may be among
  the message's annotations or properties): the key's value as :func:`find_in_map` answers,
  unless the marker's bytes occur in the range searched, where it answers the marker
  itself (the very object, which no value read from the bytes is), as
  :func:`proton_broker.codec.values.find_unmarked_python` does.
* It is optional: where it was not built (no C compiler when the package was installed),
  ``values`` uses the Python walks.

Why compiled: every message with application properties is checked as it arrives, and on
the interpreter the check cost about 5,800 instructions for a map of one pair, about 6% of
all the broker spends on a keyed message; a last-value, group or sort key is read from every
message, about 5,400 instructions more (docs/performance.md).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.string cimport memcmp


cdef extern from "string.h":  # a GNU extension: Python.h asks for them (_GNU_SOURCE)
    void* memmem(const void* haystack, size_t size, const void* needle, size_t length) nogil


cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object text, Py_ssize_t* size) except NULL

cdef signed char _step[256]
cdef signed char _VAR8 = 0, _VAR32 = 0, _TEXT8 = 0, _TEXT32 = 0
cdef bint _ready = False


def use_steps(steps, int var8, int var32, int text8, int text32):
    """Take the step of each constructor (> 0: the value's whole size; the kinds ``var8``,
    ``var32``, ``text8`` and ``text32``: a size read from the bytes; 0: not a simple value)."""
    global _VAR8, _VAR32, _TEXT8, _TEXT32, _ready
    if len(steps) != 256:
        raise ValueError("a step for each of the 256 constructors")
    for code in range(256):
        _step[code] = steps[code]
    _VAR8, _VAR32, _TEXT8, _TEXT32 = var8, var32, text8, text32
    _ready = True


cdef inline Py_ssize_t _u32(const unsigned char* p) noexcept:
    return (<Py_ssize_t>p[0] << 24) | (<Py_ssize_t>p[1] << 16) | (<Py_ssize_t>p[2] << 8) | p[3]


cdef bint _text(const unsigned char* p, Py_ssize_t n, unsigned char code):
    """Whether the ``n`` bytes at ``p`` are a well-formed text of constructor ``code``:
    ASCII, or for a string (str8, str32) valid UTF-8 (a symbol is ASCII)."""
    cdef Py_ssize_t i
    for i in range(n):
        if p[i] & 0x80:
            break
    else:
        return True
    if code != 0xA1 and code != 0xB1:
        return False
    try:
        (<const char*>p)[:n].decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def skip_simple_map(bytes data, Py_ssize_t at):
    """The offset after the map at ``at`` if it is application properties of the usual
    kind, else -1 (see the module rules)."""
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef Py_ssize_t end = PyBytes_GET_SIZE(data)
    cdef Py_ssize_t pairs, stop, start
    cdef unsigned char code
    cdef signed char width
    if not _ready:
        raise RuntimeError("use_steps was not called")
    if at < 0 or at >= end:
        return -1
    code = p[at]
    if code == 0xD1:  # a map32, as Proton's encoder writes every map
        if at + 9 > end:
            return -1
        stop, pairs, at = at + 5 + _u32(p + at + 1), _u32(p + at + 5), at + 9
    elif code == 0xC1:
        if at + 3 > end:
            return -1
        stop, pairs, at = at + 2 + p[at + 1], p[at + 2], at + 3
    else:
        return -1
    if pairs & 1 or stop > end:
        return -1
    pairs >>= 1
    while pairs:
        pairs -= 1
        if at + 2 > stop:
            return -1
        code = p[at]
        if code == 0xA1:
            start, at = at + 2, at + 2 + p[at + 1]
        elif code == 0xB1 and at + 5 <= stop:
            start, at = at + 5, at + 5 + _u32(p + at + 1)
        else:
            return -1  # not a string key
        if at >= stop or not _text(p + start, at - start, 0xA1):
            return -1
        code = p[at]
        width = _step[code]
        if width > 0:
            at += width
        elif width == _TEXT8 and at + 2 <= stop:
            start, at = at + 2, at + 2 + p[at + 1]
            if at > stop or not _text(p + start, at - start, code):
                return -1
        elif width == _VAR8 and at + 2 <= stop:
            at += 2 + p[at + 1]
        elif width == _VAR32 and at + 5 <= stop:
            at += 5 + _u32(p + at + 1)
        elif width == _TEXT32 and at + 5 <= stop:
            start, at = at + 5, at + 5 + _u32(p + at + 1)
            if at > stop or not _text(p + start, at - start, code):
                return -1
        else:
            return -1  # not of a simple type, or the map ends inside it
        if at > stop:
            return -1
    return at if at == stop else -1


cdef object _find_python = None


def use_find(find):
    """Take the Python lookup (``values.find_in_map_python``), which answers every case but
    the usual one."""
    global _find_python
    _find_python = find


def find_in_map(data, Py_ssize_t start, Py_ssize_t stop, key):
    """The value under the string ``key`` in the map at ``start``, as the Python lookup
    answers: here when the key is the map's first, as a short string, with a short string
    value (a last-value or group key is mostly a message's only property); otherwise the
    Python lookup answers (see the module rules)."""
    return _find(data, start, stop, key)


cdef object _find(data, Py_ssize_t start, Py_ssize_t stop, key):
    cdef const unsigned char* p
    cdef const char* wanted
    cdef Py_ssize_t end, at, size, n
    if type(data) is bytes and type(key) is str:
        p = <const unsigned char*>PyBytes_AS_STRING(data)
        end = PyBytes_GET_SIZE(data)
        if 0 <= start < end and stop <= end:
            at = start + 9 if p[start] == 0xD1 else start + 3 if p[start] == 0xC1 else -1
            try:
                wanted = PyUnicode_AsUTF8AndSize(key, &size)
            except UnicodeEncodeError:
                at = -1
            if (
                at > 0 and size < 256 and at + 2 + size <= stop and p[at] == 0xA1
                and p[at + 1] == size and memcmp(p + at + 2, wanted, size) == 0
            ):
                at += 2 + size
                if at + 2 <= stop and p[at] == 0xA1 and at + 2 + p[at + 1] <= end:
                    n = p[at + 1]
                    try:
                        return PyUnicode_DecodeUTF8(<const char*>p + at + 2, n, NULL)
                    except UnicodeDecodeError:
                        return None  # as the Python lookup reads a value it cannot decode
    if _find_python is None:
        raise RuntimeError("use_find was not called")
    return _find_python(data, start, stop, key)


def contains(bytes data not None, bytes needle not None, Py_ssize_t start, Py_ssize_t stop):
    """Whether ``needle`` occurs in ``data`` within ``start:stop`` (see the module rules)."""
    return _contains(data, needle, start, stop)


def find_unmarked(
    bytes data not None, Py_ssize_t start, Py_ssize_t stop, key, Py_ssize_t since,
    bytes marker not None,
):
    """:func:`find_in_map`'s answer, unless ``marker`` occurs in ``data`` within
    ``since:stop``: then ``marker`` itself (see the module rules)."""
    if _contains(data, marker, since, stop):
        return marker
    return _find(data, start, stop, key)


cdef bint _contains(bytes data, bytes needle, Py_ssize_t start, Py_ssize_t stop) except -1:
    cdef Py_ssize_t end = PyBytes_GET_SIZE(data)
    cdef Py_ssize_t length = PyBytes_GET_SIZE(needle)
    if start < 0 or stop < 0:
        return data.find(needle, start, stop) >= 0
    if stop > end:
        stop = end
    if stop - start < length:
        return False
    return memmem(
        PyBytes_AS_STRING(data) + start, stop - start, PyBytes_AS_STRING(needle), length
    ) != NULL
