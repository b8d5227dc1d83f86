"""``fdbapi.tuples`` packs and unpacks byte for byte as the binding's tuple layer does."""

from __future__ import annotations

import uuid

import fdb.tuple
import pytest
from hypothesis import given
from hypothesis import strategies as st

from django_fdbqueue.fdbapi import Subspace
from django_fdbqueue.fdbapi.tuples import QuickSubspace, pack, unpack

Versionstamp = fdb.tuple.Versionstamp
EDGES = [
    0,
    1,
    -1,
    255,
    256,
    -255,
    -256,
    2**63,
    -(2**63),
    2**64 - 2,
    2**64 - 1,
    2**64,
    -(2**64) + 2,
    -(2**64) + 1,
    -(2**64),
    10**30,
    -(10**30),
    "",
    "a\x00b",
    "\x00",
    "é€😀",
    b"",
    b"\x00",
    b"\x00\xff",
    b"a\x00\x00b",
    b"\xff",
    None,
    True,
    False,
    Versionstamp(b"\x01" * 10, 0),
    Versionstamp(b"\x00" * 10, 65535),
    Versionstamp(b"\xfe" * 10, 7),
]
# Handed to the binding whole (their encodings are its business alone).
OTHERS = [
    1.5,
    -0.0,
    uuid.UUID(int=5),
    (1, "a"),
    [1, 2],
    fdb.tuple.SingleFloat(2.5),
]


def typed(t):
    """A tuple compared with its elements' types too (``True == 1``, but a key reads back a bool)."""
    return [(type(value), value) for value in t]


elements = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([2**64 - 1, -(2**64) + 1, 2**64, -(2**64)]),
    st.text(),
    st.binary(),
    st.none(),
    st.booleans(),
    st.builds(Versionstamp, st.binary(min_size=10, max_size=10), st.integers(0, 65535)),
)


@pytest.mark.parametrize("value", EDGES + OTHERS, ids=repr)
def test_each_kind_of_element_packs_as_the_binding_does(value):
    for t in ((value,), (value, 1), ("x", value, b"y")):
        assert pack(t) == fdb.tuple.pack(t)
        assert pack(t, b"\x15\x01") == fdb.tuple.pack(t, prefix=b"\x15\x01")
        assert typed(unpack(pack(t))) == typed(fdb.tuple.unpack(fdb.tuple.pack(t)))


@given(st.lists(elements, max_size=8).map(tuple), st.binary(max_size=4))
def test_any_tuple_of_key_elements_packs_and_unpacks_as_the_binding_does(t, prefix):
    packed = fdb.tuple.pack(t, prefix=prefix)
    assert pack(t, prefix) == packed
    assert typed(unpack(packed, len(prefix))) == typed(fdb.tuple.unpack(packed, prefix_len=len(prefix)))


#: Bytes made of element codes, terminators and escapes: the edges of the decoders.
key_like = st.lists(st.sampled_from([b"\x00", b"\xff", b"\x01", b"\x02", b"\x33", b"\x14", b"\x15", b"\x13", b"a"]))


@given(st.one_of(st.binary(max_size=40), key_like.map(b"".join)))
def test_any_bytes_unpack_as_the_binding_reads_them_or_fail_as_it_does(raw):
    try:
        expected = fdb.tuple.unpack(raw)
    except Exception as error:  # noqa: BLE001 - the binding's error, whatever it is
        with pytest.raises(type(error)):
            unpack(raw)
    else:
        assert typed(unpack(raw)) == typed(expected)


def test_an_incomplete_versionstamp_is_the_binding_s_to_refuse_or_place():
    with pytest.raises(ValueError):
        pack((Versionstamp(),))
    incomplete = Versionstamp(user_version=3)
    assert unpack(fdb.tuple.pack((b"\xff" * 10,)) + b"\x33" + b"\xff" * 10 + b"\x00\x03") == (b"\xff" * 10, incomplete)


def test_quick_subspaces_are_the_binding_s_subspaces_quicker():
    plain, quick = Subspace(("root", 7)), QuickSubspace(("root", 7))
    assert quick.key() == plain.key()
    assert quick["q"][b"\x00id"].key() == plain["q"][b"\x00id"].key()
    assert isinstance(quick["q"], QuickSubspace) and isinstance(quick.subspace((1, 2)), QuickSubspace)
    t = (3, Versionstamp(b"\x02" * 10, 1), 99, "json")
    assert quick.pack(t) == plain.pack(t)
    assert quick.unpack(plain.pack(t)) == t
    assert quick.range() == plain.range() and quick.range((3,)) == plain.range((3,))
    with pytest.raises(ValueError):
        quick.unpack(b"elsewhere")
    assert quick.pack_with_versionstamp((Versionstamp(),)) == plain.pack_with_versionstamp((Versionstamp(),))
