"""Sorted codes of a big column of short text IDs, by a radix-partitioned hash.

pyarrow's ``dictionary_encode`` probes one hash table of all distinct IDs for every row: with
2M distinct instance IDs among 10M ratings that table is far bigger than the cache, each row
costs a cache miss, and coding the column took 2.1-2.5 s of one core, then 0.9 s to sort the
distinct IDs. Here IDs of at most 16 bytes are packed into two big-endian 64-bit keys plus
their length, the rows are scattered into ``2**PART_BITS`` partitions by a hash of the key,
and each partition is hashed with its own small table, which stays in cache (packing and
hashing each in two halves side by side); the distinct keys are then sorted on (first 8 bytes,
next 8 bytes, length) by an LSD radix sort (``_radix_order``, ``np.lexsort``'s order in a
third of its time), which is the order of the bytes (a shorter ID sorts before any ID it
begins), and the sorted IDs are spelled back from their keys. The result is the same as
``data._code_arrow``'s pyarrow path, codes and sorted dictionary alike
(``tests/data/test_id_hash.py``):
1.1 s instead of 2.9 for the 2M instance IDs of 10M ratings.

Used for columns of at least ``MIN_ROWS`` rows without nulls (``sorted_codes`` returns None
otherwise, and for an ID over 16 bytes: the caller then takes pyarrow's path). Needs numba
(``jit.USE_JIT``); the kernels release the GIL, so the other ID columns are coded beside.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ..numerics import jit

#: below this many rows partitioning saves less than numba's first call costs (0.3 s: 10M rows
#: with 2M distinct IDs save 1.9 s, 1M rows with 200,000 about 0.2)
MIN_ROWS = 2_000_000
#: the longest ID packed (two 64-bit keys)
MAX_BYTES = 16
#: partitions: 1,024 keep each one's table of 2M distinct IDs in cache (16 KB of slots); at
#: least 1 (a shift by 64 is undefined), at most 16 (``part`` is uint16)
PART_BITS = 10
#: rows sampled to tell a column of many distinct IDs (``many_distinct``) ...
SAMPLE = 1 << 16
#: ... from one of few: the distinct share of the sample above which partitioning pays
DISTINCT_SHARE = 0.5

#: a file of at least this many bytes may hold ``MIN_ROWS`` ratings (``preload``)
PRELOAD_BYTES = 8 * MIN_ROWS

_U = np.uint64
_MIX1 = np.uint64(0x9E3779B97F4A7C15)
_MIX2 = np.uint64(0xBF58476D1CE4E5B9)
_MIX3 = np.uint64(0xC2B2AE3D27D4EB4F)


@jit.jit(nogil=True)
def _pack(off, data, k0s, k1s, lens, part, part_bits):  # pragma: no cover - compiled
    """Per row ``i`` of one Arrow chunk (``off`` (n+1,) offsets into ``data`` bytes): its
    bytes as big-endian keys ``k0s[i]``, ``k1s[i]`` (zero-padded), its length, and its
    partition (the top ``part_bits`` of a hash). Returns the longest length seen (a row over
    16 bytes is packed wrong; the caller then falls back)."""
    n = off.size - 1
    longest = 0
    for i in range(n):
        a = off[i]
        b = off[i + 1]
        ln = b - a
        longest = max(longest, ln)
        k0 = _U(0)
        k1 = _U(0)
        for p in range(a, min(b, a + 8)):
            k0 |= _U(data[p]) << _U(8 * (7 - (p - a)))
        for p in range(a + 8, min(b, a + 16)):
            k1 |= _U(data[p]) << _U(8 * (15 - (p - a)))
        h = (k0 ^ (k1 * _MIX1) ^ _U(ln)) * _MIX2
        h ^= h >> _U(31)
        k0s[i] = k0
        k1s[i] = k1
        lens[i] = np.uint8(ln)
        part[i] = np.uint16(h >> _U(64 - part_bits))
    return longest


@jit.jit(nogil=True)
def _partition(part, part_bits):  # pragma: no cover - compiled
    """Counting sort of the rows by partition: ``start`` (P+1,) where each partition's rows
    begin in ``rows`` (L,) int32."""
    n = part.size
    n_part = 1 << part_bits
    start = np.zeros(n_part + 1, np.int64)
    for i in range(n):
        start[part[i] + 1] += 1
    for p in range(n_part):
        start[p + 1] += start[p]
    rows = np.empty(n, np.int32)
    pos = start[:-1].copy()
    for i in range(n):
        p = part[i]
        rows[pos[p]] = i
        pos[p] += 1
    return start, rows


@jit.jit(nogil=True)
def _encode(k0s, k1s, lens, start, rows, p_lo, p_hi, base, codes):  # pragma: no cover
    """Hash the rows of partitions ``p_lo`` to ``p_hi`` (``_partition``), each with its own
    table: ``codes[i]`` = ``base`` + the number of its ID in order of first appearance,
    partition by partition; returns each distinct ID's two keys and length (u,)."""
    widest = 0
    for p in range(p_lo, p_hi):
        widest = max(widest, start[p + 1] - start[p])
    cap = 1
    while cap < 2 * widest:
        cap *= 2
    table = np.full(cap, -1, np.int32)
    most = start[p_hi] - start[p_lo]
    uk0 = np.empty(most, np.uint64)
    uk1 = np.empty(most, np.uint64)
    ulen = np.empty(most, np.uint8)
    u = 0
    for p in range(p_lo, p_hi):
        s0 = start[p]
        s1 = start[p + 1]
        size = 1
        while size < 2 * (s1 - s0):
            size *= 2
        mask = size - 1
        for j in range(s0, s1):
            i = rows[j]
            k0 = k0s[i]
            k1 = k1s[i]
            ln = lens[i]
            h = (k0 ^ (k1 * _MIX1) ^ _U(ln)) * _MIX3
            s = np.int64(h >> _U(40)) & mask
            while True:
                k = table[s]
                if k < 0:
                    table[s] = u
                    uk0[u] = k0
                    uk1[u] = k1
                    ulen[u] = ln
                    codes[i] = base + u
                    u += 1
                    break
                if uk0[k] == k0 and uk1[k] == k1 and ulen[k] == ln:
                    codes[i] = base + k
                    break
                s = (s + 1) & mask
        table[:size] = -1
    return uk0[:u].copy(), uk1[:u].copy(), ulen[:u].copy()


@jit.jit(nogil=True)
def _spell(uk0, uk1, ulen, order):  # pragma: no cover - compiled
    """The distinct IDs in ``order`` as Arrow string buffers: (M+1,) int32 offsets and the
    bytes, unpacked from their keys."""
    m = order.size
    off = np.empty(m + 1, np.int32)
    off[0] = 0
    for j in range(m):
        off[j + 1] = off[j] + np.int32(ulen[order[j]])
    data = np.empty(off[m], np.uint8)
    for j in range(m):
        k = order[j]
        a = off[j]
        for q in range(np.int64(ulen[k])):
            key = uk0[k] if q < 8 else uk1[k]
            data[a + q] = np.uint8((key >> _U(8 * (7 - (q % 8)))) & _U(255))
    return off, data


@jit.jit(nogil=True)
def _radix_pass(key, shift, order, out, count):  # pragma: no cover - compiled
    """One stable counting-sort pass of ``order`` (M,) by the 16-bit digit of ``key`` (M,)
    uint64 at ``shift``, into ``out``; False (nothing written) when every key has the same
    digit, so the order stands."""
    count[:] = 0
    for i in range(key.size):  # counting needs no order
        count[np.int64((key[i] >> shift) & _U(0xFFFF))] += 1
    if count.max() == key.size:
        return False
    total = 0
    for b in range(count.size):
        c = count[b]
        count[b] = total
        total += c
    for j in range(order.size):
        i = order[j]
        b = np.int64((key[i] >> shift) & _U(0xFFFF))
        out[count[b]] = i
        count[b] += 1
    return True


def _radix_order(keys: list[np.ndarray], digits: list[int]) -> np.ndarray:
    """The permutation (M,) that sorts by ``keys`` (uint64 (M,) each, the most significant
    first; ``digits[k]``: how many 16-bit digits of key k count): an LSD radix sort, least
    significant digit first, a digit skipped when every key shares it (IDs with a common
    prefix). Stable, so it is ``np.lexsort(keys[::-1])``'s order, in a third of its time."""
    m = keys[0].size
    order, out = np.arange(m, dtype=np.int64), np.empty(m, np.int64)
    count = np.zeros(1 << 16, np.int64)
    for key, n_digits in reversed(list(zip(keys, digits, strict=True))):
        for d in range(n_digits):
            if _radix_pass(key, _U(16 * d), order, out, count):
                order, out = out, order
    return order


@jit.jit(nogil=True)
def _rerank(codes, rank):  # pragma: no cover - compiled
    """``codes[i] = rank[codes[i]]`` in place (no second (L,) array)."""
    for i in range(codes.size):
        codes[i] = rank[codes[i]]


def _side_by_side(fn: Callable[..., Any], first: tuple, second: tuple) -> tuple[Any, Any]:
    """``(fn(*first), fn(*second))``, the second in another thread (the kernels release the
    GIL, so the two halves share the cores)."""
    with ThreadPoolExecutor(1) as pool:
        later = pool.submit(fn, *second)
        return fn(*first), later.result()


def _chunk_buffers(chunk: Any) -> tuple[np.ndarray, np.ndarray]:
    """(n+1,) offsets and the value bytes of one Arrow string / large_string chunk."""
    import pyarrow as pa

    width = np.int64 if pa.types.is_large_string(chunk.type) else np.int32
    _, offsets, values = chunk.buffers()
    off = np.frombuffer(offsets, width)[chunk.offset : chunk.offset + len(chunk) + 1]
    data = np.frombuffer(values, np.uint8) if values is not None else np.zeros(0, np.uint8)
    return off, data


_PRELOADED = threading.Event()


def _load_kernels() -> None:
    """Call each kernel once on empty input: numba's first call in a process sets up its
    compiler (about 0.3 s) and loads the cached machine code (or compiles it)."""
    empty, none = np.zeros(0, np.uint64), np.zeros(0, np.uint8)
    _pack(np.zeros(1, np.int32), none, empty, empty, none, np.zeros(0, np.uint16), PART_BITS)
    start, rows = _partition(np.zeros(0, np.uint16), PART_BITS)
    codes = np.zeros(0, np.int32)
    _encode(empty, empty, none, start, rows, 0, 0, 0, codes)
    order = np.zeros(0, np.int64)
    _radix_pass(empty, _U(0), order, order.copy(), np.zeros(1 << 16, np.int64))
    _spell(empty, empty, none, order)
    _rerank(codes, codes)


def preload(n_bytes: int) -> None:
    """For a file of ``n_bytes`` that may be coded here (``PRELOAD_BYTES``), load the kernels
    in a background thread, once per process: the CSV parse that comes first runs in pyarrow's
    threads without the GIL, so numba's setup is done by the time the IDs are coded."""
    if n_bytes < PRELOAD_BYTES or not jit.USE_JIT or _PRELOADED.is_set():
        return
    _PRELOADED.set()
    threading.Thread(target=_load_kernels, name="ordmix-idhash", daemon=True).start()


def many_distinct(arr: Any) -> bool:
    """Whether ``SAMPLE`` rows, in 16 runs spread over the column, hold more than
    ``DISTINCT_SHARE`` distinct IDs: the table of all of them then outgrows the cache (2M
    instances: 97%), where with few (20,000 annotators: 15%; 1,000 queries: 1%) pyarrow's
    single table stays in it and is faster than partitioning."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n, runs = len(arr), 16
    width = min(n, SAMPLE) // runs
    pieces = [arr.slice(int(k * (n - width) // (runs - 1)), width) for k in range(runs)]
    chunks = [c for p in pieces for c in (p.chunks if isinstance(p, pa.ChunkedArray) else [p])]
    sample = pa.chunked_array(chunks, type=arr.type)
    return pc.count_distinct(sample).as_py() > DISTINCT_SHARE * len(sample)


def sorted_codes(arr: Any) -> tuple[np.ndarray, Any] | None:
    """``(codes, dictionary)`` of a pyarrow string (chunked) array: ``codes`` (L,) int32, the
    rank of each row's ID among the distinct IDs in byte order, and those IDs in that order
    (a pyarrow string array). None when this path does not apply: fewer than ``MIN_ROWS``
    rows, a null, an ID over ``MAX_BYTES`` bytes, few distinct IDs (``many_distinct``), not
    plain text, no numba. The partitions are hashed in two halves side by side."""
    import pyarrow as pa

    if not jit.USE_JIT or len(arr) < MIN_ROWS or arr.null_count:
        return None
    chunks = arr.chunks if isinstance(arr, pa.ChunkedArray) else [arr]
    if not all(pa.types.is_string(c.type) or pa.types.is_large_string(c.type) for c in chunks):
        return None
    if not many_distinct(arr):
        return None
    n = len(arr)
    k0s, k1s = np.empty(n, np.uint64), np.empty(n, np.uint64)
    lens, part = np.empty(n, np.uint8), np.empty(n, np.uint16)
    ends = np.cumsum([len(chunk) for chunk in chunks])

    def pack(todo: range, out: tuple[np.ndarray, ...]) -> int:
        """Pack chunks ``todo`` into ``out`` (keys, lengths, partitions); the longest ID."""
        longest = 0
        for c in todo:
            off, data = _chunk_buffers(chunks[c])
            rows = slice(int(ends[c] - len(chunks[c])), int(ends[c]))
            longest = max(longest, _pack(off, data, *(a[rows] for a in out), PART_BITS))
        return longest

    half = int(np.searchsorted(ends, n // 2))  # the chunks in two halves
    out = (k0s, k1s, lens, part)
    longest = max(_side_by_side(pack, (range(half), out), (range(half, len(chunks)), out)))
    if longest > MAX_BYTES:
        return None
    start, rows = _partition(part, PART_BITS)
    del part
    n_part = start.size - 1
    mid = int(np.searchsorted(start, n // 2))  # two halves of about n / 2 rows each
    mid = min(max(mid, 1), n_part - 1)
    codes = np.empty(n, np.int32)
    base = int(start[mid])  # the second half's codes start here: no clash with the first's
    keys = (k0s, k1s, lens, start, rows)
    first_half, second_half = _side_by_side(
        _encode, (*keys, 0, mid, 0, codes), (*keys, mid, n_part, base, codes)
    )
    del k0s, k1s, lens, rows
    uk0, uk1, ulen = (np.concatenate(pair) for pair in zip(first_half, second_half, strict=True))
    u1 = first_half[0].size
    # byte order: the first 8 bytes, the next 8, then the length (a prefix first); with at
    # most 15 bytes the 16th is zero in every key and the length fits there
    if longest < MAX_BYTES:
        order = _radix_order([uk0, uk1 | ulen.astype(np.uint64)], [4, 4])
    else:
        order = _radix_order([uk0, uk1, ulen.astype(np.uint64)], [4, 4, 1])
    local = np.concatenate([np.arange(u1), base + np.arange(uk0.size - u1)])
    rank = np.empty(base + uk0.size - u1, np.int32)
    rank[local[order]] = np.arange(order.size, dtype=np.int32)
    _rerank(codes, rank)
    off, data = _spell(uk0, uk1, ulen, order)
    dictionary = pa.StringArray.from_buffers(order.size, pa.py_buffer(off), pa.py_buffer(data))
    return codes, dictionary
