"""What the fuzz tests share: hypothesis settings and strategies for wild JSON values
(lone surrogates, NaN, 1e999, integers past 2**63, deep nesting) and a serialiser that
writes them as a hostile client would."""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

#: Deterministic in CI and locally alike: a fixed example set, no example database.
FUZZ = settings(deadline=None, derandomize=True, database=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.data_too_large])

#: Placeholders the serialiser turns into text json.dumps cannot write itself.
OVERFLOW = 1.7976931348623157e308  # written as 1e999, which Python reads as inf
_DEEP = re.compile(r'"__deep_(\d+)__"')

# Pools drawn with one choice each: hypothesis spends most of a fuzz run drawing text
# character by character, so tricky values come from lists and free text stays short.
ODD_TEXTS = ["", " ", "\ud800", "a\udfff b", "\udbff\udbff", "\udc00x", "nul\x00", "\u2028line", "\ufeffbom",
             "\U0001f600", "é", "\\", '"', "%s%n", "'; DROP TABLE notes; --", "<script>", "../../etc/passwd",
             "title:x", "due:99991231", "9999-12-31T23:59:59-12:00", "1e999", "NaN", "-0", "x" * 300]
texts = st.sampled_from(ODD_TEXTS) | st.text(max_size=8)
EDGE_NUMBERS = [0, -1, 1, 2**31, 2**53 - 1, 2**53, -(2**53), 2**63 - 1, 2**63, -(2**63) - 1, 2**64, 10**30, 10**400,
                0.5, -0.0, 1e308, float("nan"), float("inf"), float("-inf")]
numbers = st.sampled_from(EDGE_NUMBERS) | st.integers(-1000, 10**6) | st.just(OVERFLOW)
# Either side of the depth where parsers give up (~1000, less the stack in use), never near it:
# there the answer depends on how deep the parser was called, not on the input.
deep = (st.integers(65, 400) | st.just(5000)).map(lambda n: f"__deep_{n}__")
#: One of these in otherwise valid arguments reaches a handler unless an edge stops it.
poison = st.sampled_from(["\ud800", "a\udfff b", "\udbff\udbff", "x\x00y", float("nan"), float("inf"), float("-inf"),
                          OVERFLOW, 2**53, 2**63, -(2**63) - 1, 10**30, "__deep_300__", "__deep_5000__"])
scalars = st.none() | st.booleans() | numbers | texts
wild_values = st.recursive(
    scalars | deep,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=6,
)


def hostile_json(value: Any) -> bytes:
    """``value`` as JSON text the way a careless or hostile client writes it: lone
    surrogates as ``\\ud800`` escapes, NaN and Infinity as bare literals, an overflowing
    number as ``1e999``, a deep-nesting placeholder as that many brackets."""
    text = json.dumps(value, ensure_ascii=True)
    text = text.replace(repr(OVERFLOW), "1e999")
    text = _DEEP.sub(lambda m: "[" * int(m.group(1)) + "]" * int(m.group(1)), text)
    return text.encode()
