"""JSON and YAML files of settings (a run's ``--config``, a checkpoint mapping), read
safely: no YAML aliases, no duplicate keys, one-line errors naming the file."""
from __future__ import annotations

import json
import pathlib
from typing import TYPE_CHECKING, Any

import yaml

from estimator_dist.errors import UsageError

if TYPE_CHECKING:
    import os


class _PlainLoader(yaml.SafeLoader):
    """Safe loading without aliases (an alias bomb expands a few bytes into gigabytes)
    and without duplicate keys (YAML keeps the last one silently)."""

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, f"aliases (*{event.anchor}) are not allowed in settings",
                event.start_mark)
        return super().compose_node(parent, index)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                line = key_node.start_mark.line + 1
                raise yaml.YAMLError(f"duplicate key {key!r} at line {line}")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    for key in keys:
        if keys.count(key) > 1:
            raise ValueError(f"duplicate key {key!r}")
    return dict(pairs)


def load_file(path: str | os.PathLike) -> Any:
    """Reads a JSON or YAML settings file into a dict: safe loading, no YAML aliases, no
    duplicate keys."""
    path = pathlib.Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise UsageError(f"config file must be a readable file. Received: {str(path)!r} "
                         f"({error.strerror})") from None
    except UnicodeDecodeError as error:
        raise UsageError(f"config file must be UTF-8 text. Received: {str(path)!r} (byte "
                         f"{error.object[error.start]:#04x} at offset {error.start})") from None
    kind = "JSON" if path.suffix == ".json" else "YAML"
    depth = _flow_depth(text)
    if depth > MAX_NESTING:
        raise _too_deep(path, f"{depth:,} levels of brackets")
    try:
        values = (json.loads(text, object_pairs_hook=_json_object) if kind == "JSON"
                  else yaml.load(text, Loader=_PlainLoader))  # noqa: S506 (a SafeLoader)
    except (ValueError, yaml.YAMLError) as error:  # JSONDecodeError is a ValueError.
        first = str(error).splitlines()[0]
        raise UsageError(f"config file must be valid {kind}. "
                         f"Received: {str(path)!r} ({first})") from None
    except RecursionError:  # Nesting without brackets (YAML's "- - - ..." or indents).
        raise _too_deep(path, "more levels than the reader can follow") from None
    return {} if values is None else values


# Settings nest three levels at most (params -> hidden_units -> a number); both readers
# recurse once per level and end in a RecursionError near 1,000.
MAX_NESTING = 100


def _too_deep(path: pathlib.Path, received: str) -> UsageError:
    return UsageError(f"config file must nest at most {MAX_NESTING} levels. "
                      f"Received: {str(path)!r} ({received})")


def _flow_depth(text: str) -> int:
    """The deepest nesting of [ and { in ``text``, brackets inside quotes not counted."""
    depth = deepest = 0
    quote = None
    escaped = False
    for char in text:
        if quote:
            if escaped:
                escaped = False
            elif char == "\\" and quote == '"':
                escaped = True
            elif char == quote:
                quote = None
        elif char in "\"'":
            quote = char
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest
