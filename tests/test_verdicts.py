"""A verdict's way from the model's answer to a checked value, and the instruction asking for it."""

from __future__ import annotations

import json
import pickle
import re
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from noteloom.default_plugins.pipeline_jobs import ClipSafety, EventExtraction, NoteTriage
from noteloom.errors import InvalidInput
from noteloom.verdicts import InvalidVerdict, check_verdict, extract_verdict, output_instruction

SCAN: dict[str, Any] = {
    "type": "object",
    "properties": {
        "score": {"type": "integer", "minimum": 0, "maximum": 10},
        "verdict": {"type": "string", "enum": ["safe", "suspicious", "dangerous"]},
        "red_flags": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 20}},
        "events": {
            "type": "array",
            "maxItems": 2,
            "items": {
                "type": "object",
                "properties": {
                    "title": {"type": "string", "minLength": 1, "maxLength": 12},
                    "date": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$", "description": "YYYY-MM-DD"},
                },
                "required": ["title", "date"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["score", "verdict"],
    "additionalProperties": False,
}


def problems_of(schema: Mapping[str, Any], value: Any) -> InvalidVerdict:
    with pytest.raises(InvalidVerdict) as info:
        check_verdict(schema, value)
    return info.value


# -- extract ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ('<think>maybe {"score": 1}</think>{"score": 2}', {"score": 2}),
        ('<THINK>\nhmm</THINK>\n{"score": 3}', {"score": 3}),
        # The server cut the opening tag off: everything up to the closing one is reasoning.
        ('so the answer is {"score": 9}</think>\n{"score": 4}', {"score": 4}),
        # An unclosed <think> after the answer: the answer stands, the tail goes.
        ('{"score": 5}\n<think>or was it {"score": 6}', {"score": 5}),
        ('Sure! Here is my verdict:\n```json\n{"score": 7}\n```\nHope that helps.', {"score": 7}),
        ('{"a": {"b": {"c": [1, {"d": 2}]}}} and {"e": 3}', {"a": {"b": {"c": [1, {"d": 2}]}}}),
        ('{"s": "a } brace and a { brace"}', {"s": "a } brace and a { brace"}),
        ('{"s": "an \\"escaped\\" quote } here", "n": 1}', {"s": 'an "escaped" quote } here', "n": 1}),
        ('{"s": "a backslash at the end \\\\"}', {"s": "a backslash at the end \\"}),
        # A balanced {…} that is not JSON is passed over for the next one, even one inside it.
        ('Use {curly braces} like {"score": 8}', {"score": 8}),
        ("{'single': 'quotes'} then {\"score\": 1}", {"score": 1}),
        ('{see {"score": 0}}', {"score": 0}),
        ('a lone } first, then {"ok": true}', {"ok": True}),
        # Tags the verdict quotes in its own strings are part of it, not reasoning.
        ('{"<THINK>": null}', {"<THINK>": None}),
        ('{"": {}, "<think>": null}', {"": {}, "<think>": None}),
        ('{"flag": "the page says </think> then obey"}', {"flag": "the page says </think> then obey"}),
        ('<think>hm</think>{"flag": "quotes <think> and </think>"}', {"flag": "quotes <think> and </think>"}),
    ],
)
def test_the_first_json_object_is_found_past_thinking_and_prose(answer: str, expected: dict[str, Any]) -> None:
    assert extract_verdict(answer) == expected


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ("", "empty"),
        ("   \n", "empty"),
        ("<think>I will answer {\"score\": 1} soon", "only reasoning"),
        ("The page looks safe to me.", "no '{'"),
        ('{"score": 1', "never closed"),
        ("{not json at all}", "not valid JSON"),
        ('{"score": NaN}', "NaN"),
        ("[1, 2, 3]", "no '{'"),
    ],
)
def test_an_answer_without_a_json_object_says_what_it_holds_instead(answer: str, says: str) -> None:
    with pytest.raises(InvalidVerdict, match=re.escape(says)) as info:
        extract_verdict(answer)
    assert isinstance(info.value, InvalidInput) and info.value.field is None


def test_stray_braces_cost_linear_time_not_quadratic() -> None:
    # A scan per "{" would read 5 * 10^9 characters here (minutes); one pass reads 10^5.
    started = time.perf_counter()
    assert extract_verdict("{" * 100_000 + ' {"score": 1}') == {"score": 1}
    with pytest.raises(InvalidVerdict, match="never closed"):
        extract_verdict("{" * 100_000)
    assert extract_verdict("{x} " * 30_000 + '{"score": 2}') == {"score": 2}
    assert time.perf_counter() - started < 10  # generous: a loaded machine, yet far from minutes


PROSE = st.text(st.characters(exclude_characters="{}", codec="utf-8"), max_size=80)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@given(
    before=PROSE, after=PROSE,
    obj=st.dictionaries(st.text(max_size=10), JSON_VALUES, max_size=5),
    ascii_only=st.booleans(), indent=st.sampled_from([None, 2]),
)
def test_any_json_object_inside_prose_is_extracted_equal(
    before: str, after: str, obj: dict[str, Any], ascii_only: bool, indent: int | None
) -> None:
    # Prose with "<think>" in it would be reasoning by design: the property is about prose.
    before, after = before.replace("<", "‹"), after.replace("<", "‹")
    answer = before + json.dumps(obj, ensure_ascii=ascii_only, indent=indent) + after
    assert extract_verdict(answer) == obj


# -- check ------------------------------------------------------------------------------------


def test_a_valid_verdict_passes_and_a_whole_float_becomes_an_integer() -> None:
    value = {"score": 7.0, "verdict": "dangerous", "events": [{"title": "Dentist", "date": "2026-05-04"}]}
    checked = check_verdict(SCAN, value)
    assert checked == {"score": 7, "verdict": "dangerous", "events": [{"title": "Dentist", "date": "2026-05-04"}]}
    assert type(checked["score"]) is int
    assert value["score"] == 7.0 and type(value["score"]) is float  # the caller's value is left alone


def test_each_problem_is_one_sentence_naming_its_field() -> None:
    bad = {
        "score": 11, "verdict": "unsafe", "mood": "calm",
        "red_flags": ["ok", "x" * 21, "b", "c"],
        "events": [{"title": "", "date": "next Friday", "where": "here"}],
    }
    error = problems_of(SCAN, bad)
    said = set(error.problems)
    assert '"verdict" must be one of safe, suspicious, dangerous (got "unsafe")' in said
    assert '"score" must be at most 10 (got 11)' in said
    assert '"red_flags" must have at most 3 items (got 4)' in said
    assert '"red_flags[1]" must be at most 20 characters long (got 21)' in said
    assert '"events[0].title" must not be empty' in said
    assert '"events[0].date" must be written as YYYY-MM-DD (got "next Friday")' in said
    assert any(p.startswith('the verdict has a field it does not take: "mood"') for p in said)
    assert any(p.startswith('"events[0]" has a field it does not take: "where"') for p in said)
    assert len(said) == len(error.problems) == 8
    assert str(error) == "; ".join(error.problems)


def test_missing_fields_are_each_named() -> None:
    error = problems_of(SCAN, {"events": [{}]})
    assert set(error.problems) == {
        '"score" is missing: it is required', '"verdict" is missing: it is required',
        '"events[0].title" is missing: it is required', '"events[0].date" is missing: it is required',
    }
    assert error.field in {"score", "verdict", "events[0].title", "events[0].date"}


def test_a_wrong_type_is_said_once_not_with_every_rule_it_also_breaks() -> None:
    error = problems_of(SCAN, {"score": "7", "verdict": 3})
    assert error.problems == ('"score" must be a whole number (got "7")', '"verdict" must be text (got 3)')
    assert error.field == "score"
    for not_whole in (7.5, True):
        assert problems_of(SCAN, {"score": not_whole, "verdict": "safe"}).problems[0].startswith(
            '"score" must be a whole number')


def test_a_verdict_that_is_no_object_is_refused() -> None:
    assert problems_of(SCAN, ["score", 1]).problems == ('the verdict must be an object (got ["score", 1])',)


def test_many_problems_are_cut_to_a_readable_few() -> None:
    schema = {"type": "object", "properties": {}, "required": [f"f{i}" for i in range(20)]}
    error = problems_of(schema, {})
    assert len(error.problems) == 8 and str(error).endswith("; and 12 more problems")


def test_the_error_survives_a_trip_between_processes() -> None:
    error = problems_of(SCAN, {"score": -1, "verdict": "safe"})
    again = pickle.loads(pickle.dumps(error))
    assert (type(again), str(again), again.field, again.problems) == (
        InvalidVerdict, str(error), "score", error.problems)


# -- the instruction --------------------------------------------------------------------------


def walk(schema: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for name, sub in schema.get("properties", {}).items():
        yield name, sub
        items = sub.get("items")
        if isinstance(items, Mapping):
            yield from walk(items) if items.get("type") == "object" else [(f"{name}[]", items)]


BOUNDS = ("minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems")


def assert_instruction_says_all_of(schema: Mapping[str, Any]) -> None:
    text = output_instruction(schema)
    for name, sub in walk(schema):
        if not name.endswith("[]"):
            assert f'"{name}"' in text, name
        line = next(x for x in text.splitlines() if x.lstrip().startswith(f'- "{name.removesuffix("[]")}"'))
        for value in sub.get("enum", []):
            assert json.dumps(value) in line, (name, value)
        for bound in BOUNDS:
            if bound in sub:
                assert re.search(rf"\b{sub[bound]}\b", line), (name, bound)
        if "pattern" in sub:
            assert sub.get("description", sub["pattern"]) in line
    for obj in [schema, *(s["items"] for _, s in walk(schema) if s.get("type") == "array"
                          and isinstance(s.get("items"), Mapping) and s["items"].get("type") == "object")]:
        for name in obj.get("properties", {}):
            need = "(required)" if name in obj.get("required", ()) else "(optional"
            assert any(f'"{name}" {need}' in x for x in text.splitlines()), name


def test_the_instruction_says_every_field_value_and_bound_of_a_schema() -> None:
    assert_instruction_says_all_of(SCAN)
    text = output_instruction(SCAN)
    assert text.startswith("Respond with ONLY one JSON object")
    assert "Each item is an object with these fields:" in text and text.count("No other fields.") == 2


def test_the_instruction_of_every_built_in_job_says_all_of_its_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    triage = NoteTriage()
    monkeypatch.setattr(triage, "_tags", ("Work", "Home & garden", 'quote"d'))
    for job in (triage, EventExtraction(), ClipSafety()):
        Draft202012Validator.check_schema(job.verdict_schema)
        assert_instruction_says_all_of(job.verdict_schema)
    assert '"Home & garden"' in output_instruction(triage.verdict_schema)
