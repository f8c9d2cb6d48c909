"""Tools from typed Python functions: the machinery of ``ToolDef.from_function``.

::

    async def plan(ctx: ToolContext, destination: str, days: int = 3,
                   companions: list[str] | None = None) -> dict[str, Any]:
        \"\"\"Plan what to pack for a trip.

        Args:
            destination: Where the trip goes.
            days: How many days it lasts.
        \"\"\"

    ToolDef.from_function(plan)

- The input schema comes from the signature: ``str``, ``int``, ``float``, ``bool``, ``None``,
  ``list[...]``/``Sequence[...]``/``set[...]``/``tuple[X, ...]``, ``dict[str, ...]``,
  ``Literal[...]``, enums, unions and ``Optional``, defaults (a parameter without one is
  required) and ``Annotated[T, "description"]``. The parameter annotated ``ToolContext`` is
  the call's context, given to the function and absent from the schema. No other argument
  is accepted (``additionalProperties: false``).
- Anything else — a pydantic ``Field(...)``, a dataclass, a ``TypedDict``, a model as one
  parameter's type — is read by pydantic, which is imported only then: a plugin whose tools
  have plain signatures loads no pydantic when noteloom starts. A function whose one
  parameter (besides the context) is a pydantic model takes the model's fields as its input
  and is given the model.
- The description is the docstring's first paragraph; a parameter's comes from
  ``Annotated``, a ``Field``'s ``description`` or the docstring's ``Args:`` section
  (Google style; NumPy and reST work too).
- The registry validates the arguments once against the schema (``ToolArgumentError``); the
  function is then called with them as keyword arguments (enums, sets and tuples made from
  their JSON form). A synchronous function runs in a worker thread. A pydantic model or a
  dataclass it returns is sent as its JSON form.
- The output schema comes from the return annotation: a pydantic model's, or for ``str``
  :data:`TEXT_OUTPUT_SCHEMA`; any other return type gives none.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
import json
import re
import sys
import types
from collections.abc import Callable, Mapping, MutableSequence, Sequence
from collections.abc import Set as AbstractSet
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    Literal,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

from anyio import to_thread

from noteloom.tools import FIX_ARGUMENTS, ToolArgumentError, ToolContext, ToolResult

if TYPE_CHECKING:
    from noteloom.tools import Handler

#: A tool name as every provider accepts it.
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: The handler attribute that holds the schema made from the signature (``schema_is_generated``).
GENERATED = "__noteloom_schema__"
_ARGS_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Params|Keyword Args)\s*:?\s*$|:param\s", re.MULTILINE)

Convert = Callable[[Any], Any]


class _NeedsPydantic(Exception):
    """A parameter's type is not one the plain reader knows."""


@dataclasses.dataclass(frozen=True)
class Signature:
    """What a function's signature says about its tool."""

    schema: dict[str, Any]
    #: Turns validated arguments into the function's keyword arguments.
    bind: Callable[[dict[str, Any]], dict[str, Any]]
    #: The name of the parameter that receives the ``ToolContext``, if any.
    context: str | None
    description: str | None
    output_schema: dict[str, Any] | None = None


def schema_is_generated(handler: Any, schema: Mapping[str, Any]) -> bool:
    """Whether ``schema`` is the one ``from_function`` made for ``handler`` (valid by construction)."""
    return getattr(handler, GENERATED, None) is schema


def tool_fields(
    fn: Callable[..., Any], *, name: str | None = None, description: str | None = None
) -> tuple[str, str, dict[str, Any], Handler, dict[str, Any] | None]:
    """``(name, description, input_schema, handler, output_schema)`` of a tool made from ``fn``.

    ``TypeError``/``ValueError`` name what is wrong with the function (a plugin author's error)."""
    tool_name = name if name is not None else getattr(fn, "__name__", "")
    if not isinstance(tool_name, str) or not TOOL_NAME.fullmatch(tool_name):
        raise ValueError(
            f"tool name {tool_name!r} must be 1 to 64 letters, digits, _ or -; pass name= to from_function"
        )
    sig = read_signature(fn)
    text = description if description is not None else sig.description
    if not text or not text.strip():
        raise ValueError(f"tool {tool_name!r} needs a description: give {fn!r} a docstring, or pass description=")
    handler = _handler(fn, tool_name, sig)
    setattr(handler, GENERATED, sig.schema)
    return tool_name, text.strip(), sig.schema, handler, sig.output_schema


def read_signature(fn: Callable[..., Any]) -> Signature:
    """The schema, binding and description ``fn``'s signature and docstring give."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{fn!r} has no signature to read a tool's schema from") from exc
    hints = _hints(fn)
    doc = inspect.getdoc(fn) or ""
    summary, arg_docs = _docstring(doc)
    context: str | None = None
    inputs: list[inspect.Parameter] = []
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"{_where(fn, p.name)}: *args and **kwargs cannot be a tool's arguments; name each one")
        if p.kind is p.POSITIONAL_ONLY:
            raise TypeError(f"{_where(fn, p.name)}: a tool's arguments are passed by name; drop the '/'")
        hint = hints.get(p.name, p.annotation)
        if hint is inspect.Parameter.empty:
            raise TypeError(f"{_where(fn, p.name)} has no annotation: annotate it (Any for any JSON value)")
        if isinstance(hint, type) and issubclass(hint, ToolContext):
            if context is not None:
                raise TypeError(f"{_where(fn, p.name)}: only one parameter can receive the ToolContext")
            context = p.name
            continue
        inputs.append(p)
    output = _output_schema(hints.get("return"))
    model = _model_parameter(inputs, hints)
    if model is not None:
        return _model_signature(fn, inputs[0].name, model, context, summary, output)
    try:
        schema, bind = _plain_signature(fn, inputs, hints, arg_docs)
    except _NeedsPydantic:
        schema, bind = _pydantic_signature(fn, inputs, hints, arg_docs)
    return Signature(schema, bind, context, summary, output)


def _where(fn: Callable[..., Any], param: str) -> str:
    return f"parameter {param!r} of {getattr(fn, '__qualname__', fn)!r}"


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """The resolved annotations (``ToolContext`` resolves even where it was imported for the
    type checker only)."""
    target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else getattr(fn, "__call__", fn)  # noqa: B004
    try:
        return get_type_hints(target, localns={"ToolContext": ToolContext}, include_extras=True)
    except Exception as exc:
        raise TypeError(
            f"the annotations of {fn!r} cannot be resolved ({exc}); import what they name at module level"
        ) from exc


def _docstring(doc: str) -> tuple[str | None, dict[str, str]]:
    """The first paragraph, and the parameters' descriptions from an ``Args:`` section."""
    if not doc.strip():
        return None, {}
    first = re.split(r"\n\s*\n", doc.strip(), maxsplit=1)[0]
    args: dict[str, str] = {}
    if _ARGS_SECTION.search(doc):
        # Imported only for docstrings with a section to read (7 ms at start-up otherwise).
        import docstring_parser

        parsed = docstring_parser.parse(doc)
        args = {p.arg_name: " ".join(p.description.split()) for p in parsed.params if p.description}
        if _ARGS_SECTION.match(first):
            first = ""
    summary = " ".join(first.split()) or None
    return summary, args


# -- plain signatures (no pydantic) -------------------------------------------------------------


def _plain_signature(
    fn: Callable[..., Any], inputs: list[inspect.Parameter], hints: Mapping[str, Any], docs: Mapping[str, str]
) -> tuple[dict[str, Any], Callable[[dict[str, Any]], dict[str, Any]]]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    converts: dict[str, Convert] = {}
    for p in inputs:
        hint = hints.get(p.name, p.annotation)
        hint, described = _annotated(hint)
        if _is_field_info(p.default):
            raise _NeedsPydantic
        optional = p.default is None
        schema, convert = _plain(hint)
        if optional and not _allows_null(schema):
            schema, convert = _nullable(schema, convert)
        description = described or docs.get(p.name)
        if description:
            schema = {**schema, "description": description}
        if p.default is inspect.Parameter.empty:
            required.append(p.name)
        else:
            default = _json_default(p.default)
            if default is not _NO_DEFAULT:
                schema = {**schema, "default": default}
        properties[p.name] = schema
        if convert is not None:
            converts[p.name] = convert
    schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required

    def bind(args: dict[str, Any]) -> dict[str, Any]:
        if not converts:
            return dict(args)
        return {k: (converts[k](v) if k in converts else v) for k, v in args.items()}

    return schema, bind


def _annotated(hint: Any) -> tuple[Any, str | None]:
    """``Annotated[T, "description"]`` → ``(T, "description")``; other metadata needs pydantic."""
    if get_origin(hint) is not Annotated:
        return hint, None
    inner, *meta = get_args(hint)
    description = None
    for m in meta:
        if isinstance(m, str):
            description = m
        else:
            raise _NeedsPydantic
    return inner, description


_SIMPLE: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    None: {"type": "null"},
    Any: {},
}


def _plain(hint: Any) -> tuple[dict[str, Any], Convert | None]:
    """The JSON Schema of ``hint``, and how a JSON value becomes the Python one (``None``: as is)."""
    if hint in _SIMPLE:
        return dict(_SIMPLE[hint]), None
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _enum_schema([m.value for m in hint]), hint
    origin, args = get_origin(hint), get_args(hint)
    if origin is Annotated:
        return _plain(_annotated(hint)[0])
    if origin is Literal:
        return _enum_schema(list(args)), None
    if origin is Union or origin is types.UnionType:
        return _union(args)
    if hint in (list, tuple, set, frozenset) or origin in (list, tuple, set, frozenset, Sequence, MutableSequence, AbstractSet):
        return _array(origin or hint, args)
    if hint is dict or origin in (dict, Mapping):
        if args and args[0] is not str:
            raise _NeedsPydantic
        value, convert = _plain(args[1]) if args else ({}, None)
        schema: dict[str, Any] = {"type": "object"}
        if value:
            schema["additionalProperties"] = value
        return schema, (None if convert is None else lambda d: {k: convert(v) for k, v in d.items()})
    raise _NeedsPydantic


def _enum_schema(values: list[Any]) -> dict[str, Any]:
    for v in values:
        if not isinstance(v, str | int | float | bool) and v is not None:
            raise _NeedsPydantic
    schema: dict[str, Any] = {"enum": values}
    for kind, name in ((bool, "boolean"), (str, "string"), (int, "integer")):
        if values and all(isinstance(v, kind) and (kind is bool or not isinstance(v, bool)) for v in values):
            schema = {"type": name, "enum": values}
            break
    return schema


def _union(members: tuple[Any, ...]) -> tuple[dict[str, Any], Convert | None]:
    parts = [_plain(m) for m in members]
    non_null = [c for (_, c), m in zip(parts, members, strict=True) if m is not type(None)]
    converts = [c for c in non_null if c is not None]
    if converts and len(non_null) > 1:
        raise _NeedsPydantic  # which member a value is meant for is pydantic's to decide
    schemas = [s for s, _ in parts]
    if all(set(s) == {"type"} and isinstance(s["type"], str) for s in schemas):
        schema: dict[str, Any] = {"type": list(dict.fromkeys(s["type"] for s in schemas))}
    else:
        schema = {"anyOf": schemas}
    convert = converts[0] if converts else None
    return schema, (None if convert is None else lambda v: None if v is None else convert(v))


def _array(kind: Any, args: tuple[Any, ...]) -> tuple[dict[str, Any], Convert | None]:
    if kind is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        raise _NeedsPydantic  # a tuple of fixed length
    items, convert = _plain(args[0]) if args else ({}, None)
    schema: dict[str, Any] = {"type": "array"}
    if items:
        schema["items"] = items
    container: Callable[[Any], Any] | None = None
    if kind in (set, frozenset, AbstractSet):
        # No uniqueItems: a model that repeats an item is not worth a retry; the set drops it.
        container = frozenset if kind is frozenset else set
    elif kind is tuple:
        container = tuple
    if container is None and convert is None:
        return schema, None
    make = container or list
    return schema, lambda xs: make(convert(x) for x in xs) if convert is not None else make(xs)


def _allows_null(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    if not schema or kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    return any(_allows_null(s) for s in schema.get("anyOf", ()))


def _nullable(schema: dict[str, Any], convert: Convert | None) -> tuple[dict[str, Any], Convert | None]:
    """A parameter whose default is ``None`` takes ``null`` too."""
    kind = schema.get("type")
    if isinstance(kind, str) and "enum" not in schema:
        out = {**schema, "type": [kind, "null"]}
    elif isinstance(kind, list):
        out = {**schema, "type": [*kind, "null"]}
    else:
        out = {"anyOf": [schema, {"type": "null"}]}
    return out, (None if convert is None else lambda v: None if v is None else convert(v))


class _NoDefault:
    pass


_NO_DEFAULT = _NoDefault()


def _json_default(value: Any) -> Any:
    """A default as the schema shows it; ``_NO_DEFAULT`` when it has no JSON form."""
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, set | frozenset | tuple):
        value = list(value)
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return _NO_DEFAULT
    return value


# -- pydantic --------------------------------------------------------------------------------


def _pydantic() -> Any:
    """pydantic, imported now (never at start-up for plain signatures)."""
    try:
        import pydantic
    except ImportError as exc:  # pragma: no cover - pydantic is a dependency
        raise TypeError("this signature needs pydantic, which is not installed") from exc
    return pydantic


def _is_field_info(value: Any) -> bool:
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(value, pydantic.fields.FieldInfo)


def _is_model(hint: Any) -> bool:
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(hint, type) and issubclass(hint, pydantic.BaseModel)


def _model_parameter(inputs: list[inspect.Parameter], hints: Mapping[str, Any]) -> Any:
    if len(inputs) == 1:
        hint = hints.get(inputs[0].name, inputs[0].annotation)
        if _is_model(hint):
            return hint
    return None


#: The output schema of a tool whose result is text: MCP sends ``{"text": <the text>}`` as its
#: structured content, the text itself as content.
TEXT_OUTPUT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


def _output_schema(hint: Any) -> dict[str, Any] | None:
    if hint is str:
        return dict(TEXT_OUTPUT_SCHEMA)
    if _is_model(hint):
        schema: dict[str, Any] = hint.model_json_schema()
        schema.pop("title", None)
        return schema
    return None


def _argument_error(exc: Any) -> ToolArgumentError:
    """A pydantic ``ValidationError`` as the registry words a schema error."""
    errors = exc.errors()
    first = errors[0] if errors else {"loc": (), "msg": str(exc)}
    where = ".".join(str(p) for p in first.get("loc", ()))
    prefix = f"argument {where!r}: " if where else ""
    return ToolArgumentError(f"{prefix}{first.get('msg', 'invalid')}{FIX_ARGUMENTS}")


def _model_signature(
    fn: Callable[..., Any], param: str, model: Any, context: str | None, summary: str | None,
    output: dict[str, Any] | None,
) -> Signature:
    pydantic = _pydantic()
    schema: dict[str, Any] = model.model_json_schema()
    schema.pop("title", None)

    def bind(args: dict[str, Any]) -> dict[str, Any]:
        try:
            return {param: model.model_validate(args)}
        except pydantic.ValidationError as exc:
            raise _argument_error(exc) from None

    return Signature(schema, bind, context, summary or (inspect.getdoc(model) or "").split("\n\n")[0] or None, output)


def _pydantic_signature(
    fn: Callable[..., Any], inputs: list[inspect.Parameter], hints: Mapping[str, Any], docs: Mapping[str, str]
) -> tuple[dict[str, Any], Callable[[dict[str, Any]], dict[str, Any]]]:
    """The arguments as the fields of a model pydantic builds from the signature."""
    pydantic = _pydantic()
    fields: dict[str, Any] = {}
    for p in inputs:
        hint = hints.get(p.name, p.annotation)
        default = ... if p.default is inspect.Parameter.empty else p.default
        if p.name in docs and not _is_field_info(default):
            default = pydantic.Field(default, description=docs[p.name])
        fields[p.name] = (hint, default)
    model = pydantic.create_model(
        f"{getattr(fn, '__name__', 'tool')}_arguments",
        __config__=pydantic.ConfigDict(extra="forbid"),
        **fields,
    )
    schema: dict[str, Any] = model.model_json_schema()
    schema.pop("title", None)
    for name, prop in schema.get("properties", {}).items():
        if name in docs and "description" not in prop:
            prop["description"] = docs[name]
    names = [p.name for p in inputs]

    def bind(args: dict[str, Any]) -> dict[str, Any]:
        try:
            checked = model.model_validate(args)
        except pydantic.ValidationError as exc:
            raise _argument_error(exc) from None
        # Every field, defaults included: a default written as Field(...) is no Python default.
        return {n: getattr(checked, n) for n in names}

    return schema, bind


# -- the handler -----------------------------------------------------------------------------


def _is_async(fn: Callable[..., Any]) -> bool:
    target = fn.func if isinstance(fn, functools.partial) else fn
    return inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(getattr(target, "__call__", None))  # noqa: B004


def _handler(fn: Callable[..., Any], name: str, sig: Signature) -> Handler:
    is_async = _is_async(fn)
    bind, context = sig.bind, sig.context

    async def handler(ctx: ToolContext, args: dict[str, Any]) -> Any:
        kwargs = bind(args)
        if context is not None:
            kwargs[context] = ctx
        if is_async:
            result = await fn(**kwargs)
        else:
            result = await to_thread.run_sync(functools.partial(fn, **kwargs))
        return _payload(result)

    handler.__name__ = handler.__qualname__ = name
    # Where the function lives: whether a tool is noteloom's own is read from it.
    handler.__module__ = getattr(fn, "__module__", None) or __name__
    handler.__doc__ = getattr(fn, "__doc__", None)
    return handler


def _payload(result: Any) -> Any:
    """What a tool function returned, as the JSON form a tool's payload has."""
    if isinstance(result, ToolResult):
        return result
    pydantic = sys.modules.get("pydantic")
    if pydantic is not None and isinstance(result, pydantic.BaseModel):
        return result.model_dump(mode="json")
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        return dataclasses.asdict(result)
    return result
