"""The package's imports point one way, with no circles.

Faces (the admin, the REST API, the command line, workers, the Tasks backend, metrics, tokens,
the bench, the test plugin) call the service; the service speaks FoundationDB's API; an engine
answers it. A test fails here when an import goes against those arrows, directly or through
other modules, or when two modules import each other in any roundabout way. The graph is read
from the source by grimp (import-linter's engine); imports made only for type checkers do not
count, since they never run.
"""

from __future__ import annotations

import grimp
import pytest

PACKAGE = "django_fdbqueue"
FACES = ("admin", "api", "bench", "cli", "management", "metrics", "tasks", "testing", "tokens", "worker")
SERVICE = "service"
ENGINES = "engines"
#: What every layer may use: FoundationDB's shared names, settings, errors, codecs.
FOUNDATIONS = ("fdbapi", "clientlib", "conf", "exceptions", "codecs")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(PACKAGE, exclude_type_checking_imports=True)


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
