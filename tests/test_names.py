"""Names are compared only where they are defined: elsewhere the code asks a type or a registry.

An adaptation scope is a type (`lifelong.mechanisms.scopes`): code outside that module never
compares a scope's name; a strategy is looked up in the registry, never recognised by its name
outside its own file; a stream's keys and orders are its spec's, never recognised by its name
elsewhere.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("lifelong",)  # lifelong/strategies and lifelong/streams included
SCOPES = {"all", "head", "lora"}
STREAMS = {"text", "qa", "fewrel"}
STRATEGIES = {
    "seq", "seq-star", "replay", "agem", "ewc", "mbpa", "mbpa++", "mbpa++-rand", "meta-mbpa",
    "oml-er", "anml-er", "maml-er", "mtl", "mtl-cumulative",
}  # fmt: skip


def compared_strings(path: Path) -> list[tuple[int, str, str]]:
    """(line, string, the other side's source) of every ==, != or `in` against a string."""
    source = path.read_text(encoding="utf-8")
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        for op, (a, b) in zip(node.ops, zip(sides, sides[1:])):
            if not isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)):
                continue
            for const, other in ((a, b), (b, a)):
                values = []
                if isinstance(const, ast.Constant) and isinstance(const.value, str):
                    values = [const.value]
                elif isinstance(const, (ast.Tuple, ast.Set, ast.List)):
                    values = [
                        e.value
                        for e in const.elts
                        if isinstance(e, ast.Constant) and isinstance(e.value, str)
                    ]
                other_source = ast.get_source_segment(source, other) or ""
                found += [(node.lineno, v, other_source) for v in values]
    return found


def files() -> list[Path]:
    return [p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))]


def test_no_scope_name_is_compared_outside_the_scopes_module():
    hits = [
        f"{path.relative_to(ROOT)}:{line}: {other} vs {value!r}"
        for path in files()
        if path != ROOT / "lifelong" / "scopes.py"
        for line, value, other in compared_strings(path)
        if "scope" in other and (value in SCOPES or value.startswith("top"))
    ]
    assert not hits, (
        "ask the scope's type (lifelong.mechanisms.scopes), not its name:\n" + "\n".join(hits)
    )


def test_no_strategy_name_is_compared_outside_its_own_file():
    hits = [
        f"{path.relative_to(ROOT)}:{line}: {other} vs {value!r}"
        for path in files()
        for line, value, other in compared_strings(path)
        if value in STRATEGIES and "strateg" in other.lower()
    ]
    assert not hits, "look strategies up in the registry, not by name:\n" + "\n".join(hits)


def test_the_check_sees_a_scope_comparison(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('if self.scope.name == "lora" or meta_scope in ("head", "top2"):\n    pass\n')
    found = {(value, other) for _, value, other in compared_strings(sample)}
    assert ("lora", "self.scope.name") in found and ("head", "meta_scope") in found


def test_no_stream_name_is_compared_outside_the_streams():
    """A stream's keys, checks and order names are its spec's (`lifelong.streams.registry`)."""
    hits = [
        f"{path.relative_to(ROOT)}:{line}: {other} vs {value!r}"
        for path in files()
        if path.parent != ROOT / "lifelong" / "streams"
        for line, value, other in compared_strings(path)
        if "stream" in other and value in STREAMS
    ]
    assert not hits, "ask the stream's spec, not its name:\n" + "\n".join(hits)
