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
    found: list[str] = []
    _compare(old, new, old, new, "$", found, set())
    return found


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


def _compare(
    old: Any,
    new: Any,
    old_root: dict[str, Any],
    new_root: dict[str, Any],
    path: str,
    found: list[str],
    seen: set,
) -> None:
    old, new = _resolve(old, old_root), _resolve(new, new_root)
    if (
        isinstance(old, bool)
        or isinstance(new, bool)
        or not isinstance(old, dict)
        or not isinstance(new, dict)
    ):
        if old != new:
            found.append(f"{path}: changed from {old!r} to {new!r}")
        return
    marker = (path, id(old), id(new))
    if marker in seen:
        return
    seen.add(marker)

    old_types, new_types = _types(old), _types(new)
    if old_types != new_types:
        found.append(f"{path}: type changed from {_show(old_types)} to {_show(new_types)}")

    if "enum" in old or "enum" in new:
        if "enum" not in new:
            found.append(f"{path}: enum removed (any value may come)")
        elif "enum" not in old:
            found.append(f"{path}: enum added, narrowed to {new['enum']}")
        else:
            removed = [value for value in old["enum"] if value not in new["enum"]]
            if removed:
                found.append(f"{path}: enum narrowed, removed {removed}")

    old_props, new_props = old.get("properties", {}), new.get("properties", {})
    for name, schema in old_props.items():
        if name not in new_props:
            found.append(f"{path}.{name}: property removed")
        else:
            _compare(schema, new_props[name], old_root, new_root, f"{path}.{name}", found, seen)
    old_required, new_required = set(old.get("required", ())), set(new.get("required", ()))
    for name in sorted(new_required - old_required):
        found.append(f"{path}.{name}: new required field")
    for name in sorted(old_required - new_required):
        if name in new_props or name not in old_props:
            found.append(f"{path}.{name}: no longer required (may be absent)")

    for keyword in ("anyOf", "oneOf", "allOf"):
        old_branches, new_branches = old.get(keyword), new.get(keyword)
        if old_branches is None and new_branches is None:
            continue
        if old_branches is None or new_branches is None or len(old_branches) != len(new_branches):
            found.append(f"{path}: {keyword} changed")
            continue
        for i, (a, b) in enumerate(zip(old_branches, new_branches, strict=True)):
            _compare(a, b, old_root, new_root, f"{path}.{keyword}[{i}]", found, seen)

    for keyword in sorted((set(old) | set(new)) - ANNOTATIONS - _STRUCTURAL):
        if keyword in _SUBSCHEMA and keyword in old and keyword in new:
            _compare(old[keyword], new[keyword], old_root, new_root, f"{path}.{keyword}", found, seen)
        elif _expanded(old.get(keyword), old_root) != _expanded(new.get(keyword), new_root):
            found.append(f"{path}: {keyword} changed from {old.get(keyword)!r} to {new.get(keyword)!r}")


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
