"""Which changes of an event's JSON Schema a consumer of its version can take (docs/events.md#versioning).

A version's schema only grows: a new optional property, a new enum value, another description.
Everything else breaks a consumer holding the old schema and needs a new contract version:
a removed property, a changed type, a property that became required or stopped being required,
a removed enum value (or an enum where there was none), a changed constraint (pattern, bounds,
format, length, additionalProperties, if/then/else ...). `breaking_changes` lists them; it
resolves local `$ref`s, so moving a definition into `$defs` is not a change.
"""

from __future__ import annotations

from typing import Any

# Keywords that change what a reader is told, never what it receives.
ANNOTATIONS = frozenset(
    {"title", "description", "$comment", "examples", "default", "deprecated", "$id", "$defs"}
)
# Keywords compared below by their own rules rather than by equality.
_STRUCTURAL = frozenset({"type", "enum", "properties", "required", "anyOf", "oneOf", "allOf", "$ref"})
# Keywords whose value is a subschema a message's part must meet: compared recursively.
_SUBSCHEMA = frozenset({"items", "then", "else", "additionalProperties", "unevaluatedProperties"})


def breaking_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The changes from `old` to `new` that are not additive, one line each ([] = additive only)."""
    comparison = _Comparison(old, new)
    comparison.compare(old, new, "$")
    return comparison.found


def _resolve(node: Any, root: dict[str, Any], seen: set[str] | None = None) -> Any:
    """A local `$ref` replaced by what it names (its sibling keywords kept beside it)."""
    if not isinstance(node, dict) or "$ref" not in node:
        return node
    ref = node["$ref"]
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return node  # a remote reference: compared as written
    seen = set() if seen is None else seen
    if ref in seen:
        raise ValueError(f"circular $ref {ref}")
    target: Any = root
    for part in ref[2:].split("/"):
        target = target[part.replace("~1", "/").replace("~0", "~")]
    resolved = dict(_resolve(target, root, seen | {ref}))
    resolved.update({k: v for k, v in node.items() if k != "$ref"})
    return resolved


def _types(node: dict[str, Any]) -> frozenset[str] | None:
    kind = node.get("type")
    if kind is None:
        return None
    return frozenset([kind] if isinstance(kind, str) else kind)


class _Comparison:
    """One walk of two schemas side by side, collecting what breaks a reader of the old one."""

    def __init__(self, old_root: dict[str, Any], new_root: dict[str, Any]) -> None:
        self.old_root, self.new_root = old_root, new_root
        self.found: list[str] = []
        self._seen: set[tuple[str, int, int]] = set()

    def compare(self, old: Any, new: Any, path: str) -> None:
        old, new = _resolve(old, self.old_root), _resolve(new, self.new_root)
        if not isinstance(old, dict) or not isinstance(new, dict):  # a boolean schema, or a value
            if old != new:
                self.found.append(f"{path}: changed from {old!r} to {new!r}")
            return
        marker = (path, id(old), id(new))
        if marker in self._seen:
            return
        self._seen.add(marker)
        old_types, new_types = _types(old), _types(new)
        if old_types != new_types:
            self.found.append(f"{path}: type changed from {_show(old_types)} to {_show(new_types)}")
        self.found.extend(_enum_changes(old, new, path))
        self._properties(old, new, path)
        self._branches(old, new, path)
        self._keywords(old, new, path)

    def _properties(self, old: dict[str, Any], new: dict[str, Any], path: str) -> None:
        old_props, new_props = old.get("properties", {}), new.get("properties", {})
        for name, schema in old_props.items():
            if name not in new_props:
                self.found.append(f"{path}.{name}: property removed")
            else:
                self.compare(schema, new_props[name], f"{path}.{name}")
        old_required, new_required = set(old.get("required", ())), set(new.get("required", ()))
        for name in sorted(new_required - old_required):
            self.found.append(f"{path}.{name}: new required field")
        for name in sorted(old_required - new_required):
            if name in new_props or name not in old_props:
                self.found.append(f"{path}.{name}: no longer required (may be absent)")

    def _branches(self, old: dict[str, Any], new: dict[str, Any], path: str) -> None:
        for keyword in ("anyOf", "oneOf", "allOf"):
            old_branches, new_branches = old.get(keyword), new.get(keyword)
            if old_branches is None and new_branches is None:
                continue
            if old_branches is None or new_branches is None or len(old_branches) != len(new_branches):
                self.found.append(f"{path}: {keyword} changed")
                continue
            for i, (a, b) in enumerate(zip(old_branches, new_branches, strict=True)):
                self.compare(a, b, f"{path}.{keyword}[{i}]")

    def _keywords(self, old: dict[str, Any], new: dict[str, Any], path: str) -> None:
        for keyword in sorted((set(old) | set(new)) - ANNOTATIONS - _STRUCTURAL):
            if keyword in _SUBSCHEMA and keyword in old and keyword in new:
                self.compare(old[keyword], new[keyword], f"{path}.{keyword}")
            elif _expanded(old.get(keyword), self.old_root) != _expanded(new.get(keyword), self.new_root):
                self.found.append(
                    f"{path}: {keyword} changed from {old.get(keyword)!r} to {new.get(keyword)!r}"
                )


def _enum_changes(old: dict[str, Any], new: dict[str, Any], path: str) -> list[str]:
    if "enum" not in old and "enum" not in new:
        return []
    if "enum" not in new:
        return [f"{path}: enum removed (any value may come)"]
    if "enum" not in old:
        return [f"{path}: enum added, narrowed to {new['enum']}"]
    removed = [value for value in old["enum"] if value not in new["enum"]]
    return [f"{path}: enum narrowed, removed {removed}"] if removed else []


def _expanded(node: Any, root: dict[str, Any]) -> Any:
    """`node` with every local $ref resolved and annotations left out, for an equality check."""
    node = _resolve(node, root)
    if isinstance(node, dict):
        return {k: _expanded(v, root) for k, v in node.items() if k not in ANNOTATIONS}
    if isinstance(node, list):
        return [_expanded(v, root) for v in node]
    return node


def _show(types: frozenset[str] | None) -> str:
    return "any" if types is None else "|".join(sorted(types))
