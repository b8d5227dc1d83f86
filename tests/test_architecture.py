"""The package's imports point one way, with no circles.

Faces (access, the admin, the REST API, the command line, workers, the Tasks backend, metrics, tokens,
the bench, the test plugin) call the service; the service speaks FoundationDB's API; an engine
answers it. The project's bench references (``benchmarks``, beside the app and not in its wheel)
may import the app; the app never imports them (the bench finds them by import path at run time). A test fails here when an import goes against those arrows, directly or through
other modules, or when two modules import each other in any roundabout way. The graph is read
from the source by grimp (import-linter's engine), imports inside functions included (a test below
shows it reads them); imports made only for type checkers count too: a circle through them still
ties the modules together for every reader and type checker. A folder counts as one part of its
package, as the code map and a drawing of the floors show it: ``models`` importing
``access.patterns`` while ``access.rules`` imports ``models`` is a circle, though no module reaches
itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

import grimp
import pytest

PACKAGE = "django_fdbqueue"
#: The bench's references: a package beside the app, in the repository only.
BENCHMARKS = "benchmarks"
FACES = ("access", "admin", "api", "bench", "cli", "management", "metrics", "tasks", "testing", "tokens", "worker")
SERVICE = "service"
ENGINES = "engines"
#: What every layer may use: FoundationDB's shared names, settings, errors, codecs, how rights are written.
FOUNDATIONS = ("fdbapi", "clientlib", "conf", "exceptions", "codecs", "rights")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(PACKAGE, exclude_type_checking_imports=False)  # type-only imports count


def _full(name: str) -> str:
    return f"{PACKAGE}.{name}"


def _chain(graph: grimp.ImportGraph, importer: str, imported: str) -> str | None:
    """The shortest chain of imports from one package to another (either as a whole), or None."""
    found = graph.find_shortest_chains(importer=_full(importer), imported=_full(imported), as_packages=True)
    return " -> ".join(min(found, key=len)) if found else None


@pytest.mark.parametrize("face", FACES)
def test_the_service_never_imports_a_face(graph, face):
    assert _chain(graph, SERVICE, face) is None


@pytest.mark.parametrize("upper", (SERVICE, *FACES))
def test_engines_never_import_the_service_or_a_face(graph, upper):
    assert _chain(graph, ENGINES, upper) is None


@pytest.mark.parametrize("foundation", FOUNDATIONS)
@pytest.mark.parametrize("upper", (ENGINES, SERVICE, *FACES))
def test_the_foundations_import_no_layer_above_them(graph, foundation, upper):
    assert _chain(graph, foundation, upper) is None


def test_no_service_module_imports_the_connection(graph):
    """The service takes the database from its caller, and the ROOT with it (``fdbapi.root_of``):
    only the faces and ``connection`` know where a handle comes from."""
    assert _chain(graph, SERVICE, "connection") is None


@pytest.fixture(scope="module")
def graph_with_benchmarks() -> grimp.ImportGraph:
    # Uncached: grimp's cache keeps one record of a package's files for every graph it is in, so a
    # graph of two packages would read the other fixture's fresh record beside its own stale imports.
    return grimp.build_graph(PACKAGE, BENCHMARKS, exclude_type_checking_imports=False, cache_dir=None)


def test_the_app_never_imports_the_benchmarks(graph_with_benchmarks):
    """The wheel has no ``benchmarks``: the bench reaches it through its hook's import path only."""
    found = graph_with_benchmarks.find_shortest_chains(importer=PACKAGE, imported=BENCHMARKS, as_packages=True)
    assert found == set()


def test_the_benchmarks_and_the_app_form_no_import_circles(graph_with_benchmarks):
    assert _circles(graph_with_benchmarks) == []


def test_no_import_circles(graph):
    """No module reaches itself through the modules it imports (Tarjan's strongly connected parts)."""
    assert _circles(graph) == []


def _circles(graph: grimp.ImportGraph) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(start: str) -> None:
        # Iterative, so a deep chain of imports cannot exhaust Python's recursion limit.
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            module, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[module] = min(low[module], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                part = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    part.append(member)
                    if member == module:
                        break
                if len(part) > 1 or graph.direct_import_exists(importer=module, imported=module):
                    circles.append(sorted(part))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return circles


def test_no_import_circles_between_folders(graph):
    """No part of a package (a module, or a subpackage as a whole) reaches itself through the others."""
    assert _folder_circles(graph) == []


def _folder_circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The circles among each package's children, a subpackage folded into one node."""
    circles = []
    for package in sorted(module for module in graph.modules if graph.find_children(module)):
        parts = sorted(graph.find_children(package))
        folded = grimp.ImportGraph()
        for part in parts:
            folded.add_module(part)
        for importer in parts:
            for imported in parts:
                if importer != imported and graph.direct_import_exists(
                    importer=importer, imported=imported, as_packages=True
                ):
                    folded.add_import(importer=importer, imported=imported)
        circles += _circles(folded)
    return circles


def test_imports_inside_functions_are_read(tmp_path, monkeypatch):
    """A made-up package whose only loop is through an import inside a function: grimp reads it,
    so the circle tests above count such imports (``models`` and ``access`` once met only there)."""
    package = tmp_path / "made_up_app"
    (package / "access").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "models.py").write_text("def validate():\n    from made_up_app.access.patterns import parse\n")
    (package / "access" / "__init__.py").write_text("")
    (package / "access" / "patterns.py").write_text("def parse():\n    pass\n")
    (package / "access" / "rules.py").write_text("def can():\n    from made_up_app.models import validate\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    made = grimp.build_graph("made_up_app", cache_dir=None)
    assert made.direct_import_exists(importer="made_up_app.models", imported="made_up_app.access.patterns")
    assert _circles(made) == []  # no module reaches itself...
    assert _folder_circles(made) == [["made_up_app.access", "made_up_app.models"]]  # ...but the folders do


def test_the_circle_finder_finds_a_circle():
    """A graph with a known circle, so the test above cannot pass by finding nothing at all."""
    made = grimp.ImportGraph()
    for module in ("p.a", "p.b", "p.c", "p.d"):
        made.add_module(module)
    made.add_import(importer="p.a", imported="p.b")
    made.add_import(importer="p.b", imported="p.c")
    made.add_import(importer="p.c", imported="p.a")
    made.add_import(importer="p.c", imported="p.d")
    assert _circles(made) == [["p.a", "p.b", "p.c"]]


# -- function length ------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]
#: Functions over this many lines need a line starting with "Long:" in their docstring saying why.
MAX_FUNCTION_LINES = 60


def _long_functions(paths: list[Path], root: Path = ROOT) -> list[str]:
    """``path::name (N lines)`` of every function longer than the limit whose docstring gives no reason."""
    found = []
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            length = node.end_lineno - node.lineno + 1  # the def line to the last, decorators aside
            docstring = ast.get_docstring(node) or ""
            reasoned = any(line.strip().startswith("Long:") for line in docstring.splitlines())
            if length > MAX_FUNCTION_LINES and not reasoned:
                found.append(f"{path.relative_to(root).as_posix()}::{node.name} ({length} lines)")
    return found


def test_functions_are_short():
    """No function outside the service is over 60 lines unless its docstring says why ("Long: ...").

    Scanned: the package but ``service/`` (test_service_functions_are_short checks it), the bench's
    references (``benchmarks``) and the scripts.
    """
    package, service = ROOT / PACKAGE, ROOT / PACKAGE / SERVICE
    paths = [path for path in sorted(package.rglob("*.py")) if service not in path.parents]
    paths += sorted((ROOT / BENCHMARKS).glob("*.py"))
    paths += sorted((ROOT / "scripts").glob("*.py")) + sorted((ROOT / "scripts" / "reliability").glob("*.py"))
    found = _long_functions(paths)
    assert found == [], "Split these, or say why they are long in a docstring line starting with 'Long:'"


def test_the_length_check_finds_a_long_function(tmp_path):
    """A made-up long function is found and its "Long:" twin is not, so the tests cannot pass vacuously."""
    body = "".join(f"    x{n} = {n}\n" for n in range(MAX_FUNCTION_LINES))
    source = tmp_path / "made_up.py"
    source.write_text(f'def sprawling():\n{body}\n\ndef reasoned():\n    """Long: a table."""\n{body}')
    assert _long_functions([source], tmp_path) == [f"made_up.py::sprawling ({MAX_FUNCTION_LINES + 1} lines)"]


def test_service_functions_are_short():
    """No function in the service is over 60 lines unless its docstring says why.

    The reason is a docstring line starting with "Long:", as for the rest of the package
    (``test_functions_are_short``); the service has no entries awaiting a split.
    """
    service = ROOT / PACKAGE / SERVICE
    long = _long_functions(sorted(service.rglob("*.py")))
    assert long == [], "Split these, or say why they are long in a docstring line starting with 'Long:'"


# -- the service's public face and its private level ------------------------------------------------

PRIVATE_LEVEL = f"{PACKAGE}.{SERVICE}._internals"
#: The service's top level: the operations, their records and hooks, and the extension surface.
SERVICE_TOP_MAX = 12
#: No module of the package is longer than this (lines).
MODULE_MAX_LINES = 500


#: The one package that may look inside: the simulation's oracles check the service's own
#: invariants (key slots against leases, tenants' turns, watches and lead keys left behind), which
#: only the private layout shows. It changes with the service, in the same commits.
INSIDE_LOOKERS = (f"{PACKAGE}.testing.simulation",)


def test_nothing_outside_the_service_imports_its_private_level(graph):
    """Other packages use ``service`` and ``service.extension``; the layer's parts can change."""
    outside = [m for m in graph.modules if not m.startswith((f"{PACKAGE}.{SERVICE}", *INSIDE_LOOKERS))]
    reaching = sorted(
        f"{importer} -> {imported}"
        for importer in outside
        for imported in graph.find_modules_directly_imported_by(importer)
        if imported.startswith(PRIVATE_LEVEL)
    )
    assert reaching == []


def test_the_service_s_top_level_is_a_dozen_modules():
    import django_fdbqueue.service

    here = Path(django_fdbqueue.service.__file__).parent  # the installed package's (a wheel's too)
    top = sorted(p.stem for p in here.glob("*.py") if p.stem != "__init__")
    assert len(top) <= SERVICE_TOP_MAX, top
    assert "extension" in top


def test_no_module_is_over_500_lines():
    long = [
        f"{path.relative_to(ROOT).as_posix()} ({lines} lines)"
        for path in sorted((ROOT / PACKAGE).rglob("*.py"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MODULE_MAX_LINES
    ]
    assert long == []


def _private_names_used_across_modules(paths: list[Path], root: Path = ROOT) -> list[str]:
    """``path: name`` of each private name (``_x``) imported from another module, or read off one."""
    found = []
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        modules: set[str] = set()  # names bound to what the package imports from itself
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith(PACKAGE)):
                for alias in node.names:
                    if _private(alias.name):
                        found.append(f"{path.relative_to(root).as_posix()}: {alias.name}")
                    modules.add(alias.asname or alias.name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
                if _private(node.attr):
                    found.append(f"{path.relative_to(root).as_posix()}: {node.value.id}.{node.attr}")
    return sorted(set(found))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_private_name_crosses_modules():
    """A name with a leading underscore belongs to its module: another that needs it gets a public name."""
    found = _private_names_used_across_modules(sorted((ROOT / PACKAGE).rglob("*.py")))
    assert found == []


def test_the_private_name_check_finds_one(tmp_path):
    source = tmp_path / "made_up.py"
    source.write_text("from .a import _hidden, b\nimport sys\nb._inner()\nb.__name__\nsys._getframe()\n")
    assert _private_names_used_across_modules([source], tmp_path) == ["made_up.py: _hidden", "made_up.py: b._inner"]
