"""The layers: light imports, the core apart from the experiment layer, streams as data only."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "faiss", "pandas", "sklearn", "matplotlib")


def loaded_after(statement: str) -> list[str]:
    code = f"import sys; {statement}; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return [m for m in done.stdout.strip().split(",") if m]


@pytest.mark.parametrize(
    "statement",
    [
        "import lifelong.metrics",
        "import lifelong",
        "import lifelong.experiment.cli",
        "import lifelong.experiment.config",
        "import lifelong.streams",
    ],
)
def test_light_imports_load_no_heavy_library(statement):
    assert loaded_after(statement) == []


def test_the_public_api_loads_what_it_names_on_first_use():
    assert loaded_after("import lifelong; lifelong.summary") == []
    assert "torch" in loaded_after("import lifelong; lifelong.Batch")


def imports(path: Path) -> set[str]:
    """Every module a file imports (``from x import y`` counts as ``x`` and ``x.y``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def modules(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def test_nothing_in_lifelong_imports_a_stream_family_module():
    """Model-side work goes through task kinds; streams are data (`streams.core`), and only the
    experiment layer builds streams (`streams.registry`)."""
    families = {
        "lifelong.streams.qa",
        "lifelong.streams.fewrel",
        "lifelong.streams.text_classification",
    }
    for path in modules("lifelong"):
        if "streams" in path.relative_to(ROOT).parts[:2]:
            continue  # the streams themselves
        found = imports(path)
        assert not found & families, f"{path.relative_to(ROOT)} imports {found & families}"
        if "experiment" not in path.parts:
            assert "lifelong.streams.registry" not in found, path


def test_the_core_does_not_import_the_experiment_layer():
    for path in modules("lifelong"):
        if (
            "experiment" in path.parts
            or path.name == "__init__.py"
            and path.parent.name == "lifelong"
        ):
            continue
        found = {m for m in imports(path) if m.startswith("lifelong.experiment")}
        assert not found, f"{path.relative_to(ROOT)} imports {found}"


def test_streams_stay_data_only():
    """Streams import only themselves and the typed options their specs' fields use."""
    for path in modules("lifelong/streams"):
        found = {
            m for m in imports(path) if not m.startswith(("lifelong.streams", "lifelong.options"))
        }
        assert not {m for m in found if m.split(".")[0] in ("lifelong", "torch", "transformers")}, (
            path
        )


def layout_paths(readme: str) -> list[str]:
    """The paths the guide's layout block names (indentation = nesting)."""
    block = readme.split("## Layout", 1)[1].split("```", 2)[1]
    paths, stack = [], []
    for line in block.splitlines():
        if not line.strip():
            continue
        depth = (len(line) - len(line.lstrip())) // 2
        name = line.split()[0]
        stack = stack[:depth] + [name.rstrip("/")]
        paths.append("/".join(stack) + ("/" if name.endswith("/") else ""))
    return paths


def test_the_readme_layout_matches_the_tree():
    paths = layout_paths((ROOT / "docs" / "guide" / "layout.md").read_text())
    for path in paths:
        assert (ROOT / path).exists(), f"the layout names {path}, which does not exist"
    named = set(paths)
    for package in ("lifelong", "lifelong/streams", "lifelong/strategies", "tools"):
        for child in (ROOT / package).iterdir():
            if child.name.startswith(("_", ".")) and child.name != "__init__.py":
                continue
            if child.suffix == ".py" or (child.is_dir() and (child / "__init__.py").exists()):
                entry = f"{package}/{child.name}" + ("/" if child.is_dir() else "")
                assert entry in named or child.name == "__init__.py", f"the layout misses {entry}"


def module_name(path: Path) -> str:
    """The import name of a source file: its path (every folder is its import path)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def load_time_imports(path: Path, known: set[str]) -> set[str]:
    """The project modules a file imports when it loads: module-level statements, not those
    under ``if TYPE_CHECKING:`` or inside functions; a package the file sits in is not counted
    (Python loads it first anyway)."""
    own = module_name(path)
    found: set[str] = set()

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
            elif isinstance(node, (ast.If, ast.Try)):
                for block in ("body", "orelse", "finalbody"):
                    visit(getattr(node, block, []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                subs = {f"{node.module}.{alias.name}" for alias in node.names}
                found.update(subs & known or {node.module})

    visit(ast.parse(path.read_text()).body)
    return {m for m in found & known if m != own and not own.startswith(m + ".")}


def test_no_import_circles():
    """The issue-31 renovation removed the circles (`lifelong/streams/registry.py` and the
    family modules, the registry and the Avalanche adapters): none may come back."""
    paths = modules("lifelong")
    known = {module_name(p) for p in paths}
    graph = {module_name(p): load_time_imports(p, known) for p in paths}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def circle_from(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target] if target in path else [node, target]
            if target not in state and (found := circle_from(target, [*path, target])):
                return found
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            circle = circle_from(start, [start])
            assert circle is None, " -> ".join(circle)
