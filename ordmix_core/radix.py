"""Coding a big column of short text IDs without pyarrow's hash (issue 14's read path).

``code_short_ids(arr)`` gives what ``data._code_arrow`` gets from pyarrow's hash and sort: each
value's ``int32`` code in the sorted order of the distinct IDs, and those IDs sorted (bytewise
on their UTF-8, as pyarrow sorts text). Each ID of at most 16 bytes is packed as a 128-bit
big-endian key (two ``uint64``, zero-padded, and its length), so that ordering the keys by
``(high, low, length)`` is ordering the IDs. The rows are scattered into ``2**PART_BITS``
partitions by a hash of their key, so that each partition's hash table stays in the cache
(a table of 2 million distinct IDs does not: one cache miss a row); the distinct keys, a few
per row, are then sorted with ``np.lexsort``. Measured on 10M ratings with 2M distinct
instance IDs (``benchmarks/bench_read.py hash``): 1.5 s of CPU against pyarrow's 3.0 s.

It returns None, and the caller takes pyarrow's path, for anything else: nulls, an ID over
16 bytes, a type other than ``string`` / ``large_string``, no numba. ``data._code_arrow`` calls it
from ``data.RADIX_MIN_ROWS`` values on (below, pyarrow is fast enough and importing numba
would cost more). A chunked column is combined first (one copy of its bytes: the passes read
one offsets and one data buffer); memory besides the codes: 2 bytes a row for the partitions,
4 for the row order, 32 per distinct ID.
"""

from __future__ import annotations

import numpy as np

from .kernels import USE_JIT, _jit

#: IDs up to this many bytes (UTF-8) are packed into a key
MAX_BYTES = 16
#: partitions of the rows (1,024: a partition of 10M rows with 2M distinct IDs holds ~2,000
#: of them, a table of a few tens of kB)
PART_BITS = 10

#: slots of a partition's hash table to begin with, at most (it doubles as it fills)
FIRST_SLOTS = 1 << 16

u64 = np.uint64
_SHIFT = u64(64 - PART_BITS)


@_jit(nogil=True)
def key_at(off, data, i):  # pragma: no cover - compiled
    a = off[i]
    b = off[i + 1]
    k0 = u64(0)
    k1 = u64(0)
    for p in range(a, min(b, a + 8)):
        k0 |= u64(data[p]) << u64(8 * (7 - (p - a)))
    for p in range(a + 8, b):
        k1 |= u64(data[p]) << u64(8 * (15 - (p - a)))
    return k0, k1, np.int64(b - a)


@_jit(nogil=True)
def mix(k0, k1, n, m):  # pragma: no cover - compiled
    h = (k0 ^ (k1 * u64(0x9E3779B97F4A7C15)) ^ u64(n)) * m
    return h ^ (h >> u64(31))


@_jit(nogil=True)
def partition(off, data, max_bytes):  # pragma: no cover - compiled
    """(L,) partition of each row, or an empty array when an ID is too long."""
    n = off.size - 1
    part = np.empty(n, np.uint16)
    for i in range(n):
        if off[i + 1] - off[i] > max_bytes:
            return np.empty(0, np.uint16)
        k0, k1, ln = key_at(off, data, i)
        part[i] = np.uint16(mix(k0, k1, ln, u64(0xBF58476D1CE4E5B9)) >> _SHIFT)
    return part


@_jit(nogil=True)
def encode(off, data, part, first_slots):  # pragma: no cover - compiled
    """Codes (first appearance within the partitions), distinct keys, their first rows.

    A partition's table starts with twice its rows as slots, at most ``first_slots``, and
    doubles (its keys inserted again) whenever it is half full."""
    n = part.size
    n_parts = 1 << PART_BITS
    start = np.zeros(n_parts + 1, np.int64)
    for i in range(n):
        start[part[i] + 1] += 1
    biggest = 0
    for p in range(n_parts):
        biggest = max(biggest, start[p + 1])
        start[p + 1] += start[p]
    pos = start[:-1].copy()
    rows = np.empty(n, np.int32)
    for i in range(n):
        p = part[i]
        rows[pos[p]] = i
        pos[p] += 1
    codes = np.empty(n, np.int32)
    table = np.full(2, -1, np.int32)
    uk0 = np.empty(min(max(n, 1), 1 << 16), np.uint64)
    uk1 = np.empty_like(uk0)
    ul = np.empty(uk0.size, np.int64)
    first = np.empty(uk0.size, np.int64)
    u = 0
    for p in range(n_parts):
        s0 = start[p]
        s1 = start[p + 1]
        size = 2
        while size < 2 * (s1 - s0) and size < first_slots:
            size *= 2
        if size > table.size:
            table = np.full(size, -1, np.int32)
        u0 = u
        for j in range(s0, s1):
            i = rows[j]
            k0, k1, ln = key_at(off, data, i)
            s = np.int64(mix(k0, k1, ln, u64(0xC2B2AE3D27D4EB4F)) >> u64(32)) & (size - 1)
            while True:
                k = table[s]
                if k < 0:
                    break
                if uk0[k] == k0 and uk1[k] == k1 and ul[k] == ln:
                    break
                s = (s + 1) & (size - 1)
            if k >= 0:
                codes[i] = k
                continue
            if u == uk0.size:  # more distinct keys: grow their arrays
                more = uk0.size
                uk0 = np.concatenate((uk0, np.empty(more, np.uint64)))
                uk1 = np.concatenate((uk1, np.empty(more, np.uint64)))
                ul = np.concatenate((ul, np.empty(more, np.int64)))
                first = np.concatenate((first, np.empty(more, np.int64)))
            table[s] = u
            uk0[u] = k0
            uk1[u] = k1
            ul[u] = ln
            first[u] = i
            codes[i] = u
            u += 1
            if 2 * (u - u0) > size:  # half full: double the table, insert again
                size *= 2
                if size > table.size:
                    table = np.full(size, -1, np.int32)
                else:
                    table[:size] = -1
                for k in range(u0, u):
                    h = mix(uk0[k], uk1[k], ul[k], u64(0xC2B2AE3D27D4EB4F))
                    s = np.int64(h >> u64(32)) & (size - 1)
                    while table[s] >= 0:
                        s = (s + 1) & (size - 1)
                    table[s] = k
        table[:size] = -1
    return codes, uk0[:u], uk1[:u], ul[:u], first[:u]


def code_short_ids(arr, first_slots: int = FIRST_SLOTS):
    """``(codes (L,) int32, sorted distinct IDs as a pyarrow array)`` of a pyarrow text
    (chunked) array, or None when this path does not apply (nulls, an ID over ``MAX_BYTES``
    bytes, no numba; the caller, ``data._code_arrow``, then takes pyarrow's path).
    ``first_slots``: a power of two, see ``encode`` (small in tests, to make tables grow)."""
    import pyarrow as pa

    if len(arr) == 0 or arr.null_count:
        return None
    typ = arr.type
    if not (pa.types.is_string(typ) or pa.types.is_large_string(typ)):
        return None
    if not USE_JIT:
        return None
    if isinstance(arr, pa.ChunkedArray):
        # one offsets and one data buffer (a copy of the column's bytes when it is chunked)
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    off_type = np.int64 if pa.types.is_large_string(typ) else np.int32
    off = np.frombuffer(arr.buffers()[1], off_type)[arr.offset : arr.offset + len(arr) + 1]
    data = arr.buffers()[2]
    data = np.zeros(0, np.uint8) if data is None else np.frombuffer(data, np.uint8)
    part = partition(off, data, MAX_BYTES)
    if part.size != len(arr):
        return None
    codes, uk0, uk1, ul, first = encode(off, data, part, first_slots)
    del part
    order = np.lexsort((ul, uk1, uk0))
    rank = np.empty(order.size, np.int32)
    rank[order] = np.arange(order.size, dtype=np.int32)
    np.take(rank, codes, out=codes)
    return codes, arr.take(pa.array(first[order]))
