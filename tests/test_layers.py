"""The house's shape: no module imports one that sits above it, and no function runs on past a screen."""

import ast
import re
from pathlib import Path

import repair

PACKAGE = Path(repair.__file__).parent
# bottom to top: a module may import from its own part and from parts below it (a function-level import too)
LAYERS = [
    {"errors", "fileio", "registry", "startup", "face", "text"},
    {"issues"},
    {"purity", "edit"},
    {"stats"},
    {"data"},
    {"nmt"},
    {"review", "measures", "heldout", "report"},
    {"stages"},
    {"loop"},
    {"bench", "examples", "study"},
]
LEVEL = {part: k for k, parts in enumerate(LAYERS) for part in parts}


def part_of(module: str) -> str | None:
    names = module.split(".")
    return names[1] if len(names) > 1 and names[0] == "repair" else None


def imports(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name


def test_every_part_of_the_package_has_a_layer():
    parts = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
             if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and (p / "__init__.py").exists())}
    assert parts - set(LEVEL) == set()


def test_no_module_imports_one_above_it():
    climbs = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        mine = part_of(".".join(rel.parts))
        if mine is None:
            continue
        for line, module in imports(ast.parse(path.read_text())):
            theirs = part_of(module)
            if theirs is not None and theirs != mine and LEVEL[theirs] > LEVEL[mine]:
                climbs.append(f"{rel}.py:{line} imports {module}")
    assert climbs == []


def test_no_function_over_80_lines():
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > 80:
                long.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name}")
    assert long == []


# The names of the model families (and the runtime they share) that the stages and the loop never say: they speak to
# repair.face, and the `translator` group picks the family (docs/families.md).
FAMILY_WORDS = re.compile(r"fairseq|transformers|ctranslate2|\bct2\b|marian|\bhf\b|\bpeft\b|opus-mt|nllb", re.I)
# what the stages and the loop may import of the model layer: the model handle (ModelFiles)
MODEL_HANDLE = {"repair.nmt", "repair.nmt.preprocessing"}


def stage_files():
    return sorted((PACKAGE / "stages").glob("*.py")) + [PACKAGE / "loop.py"]


def test_the_stages_and_the_loop_name_no_model_family():
    named = [f"{p.relative_to(PACKAGE.parent)}:{n}: {line.strip()}" for p in stage_files()
             for n, line in enumerate(p.read_text().splitlines(), 1) if FAMILY_WORDS.search(line)]
    assert named == []


def test_the_stages_and_the_loop_import_no_family_module():
    found = [f"{p.relative_to(PACKAGE.parent)}:{line} imports {module}" for p in stage_files()
             for line, module in imports(ast.parse(p.read_text()))
             if module.startswith("repair.nmt") and module not in MODEL_HANDLE]
    assert found == []


def test_no_family_imports_another_package_s_private_names():
    """A family's package (repair.nmt and the packages below it) takes only public names from outside itself:
    what families share is public, in a shared module (repair.nmt.folders, repair.nmt.ct2.runtime, repair.text)."""
    private = []
    for path in sorted((PACKAGE / "nmt").rglob("*.py")):
        mine = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("repair."):
                theirs = node.module if (PACKAGE.parent / node.module.replace(".", "/")).is_dir() \
                    else node.module.rpartition(".")[0]
                private += [f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.module}.{a.name}"
                            for a in node.names if a.name.startswith("_") and theirs != mine]
    assert private == []


def module_graph() -> dict[str, set[str]]:
    """Every module of the package and the modules of the package it imports (at any depth of its code), a
    module's import of its own package's __init__ aside."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for name, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
            elif isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
        graph[name] = {t for t in targets if t in modules and t != name and not name.startswith(t + ".")}
    return graph


def test_no_import_circles():
    graph, circles, state = module_graph(), [], {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                circles.append(" -> ".join(path[path.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert circles == []


# The model layer's house: each family a package of its own, the shared modules beside them.
FAMILY_PACKAGES = ("repair.nmt.fairseq", "repair.nmt.hf")


def nmt_imports():
    """(module, line, imported module) for every import of the package's model layer."""
    for path in sorted((PACKAGE / "nmt").rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for line, module in imports(ast.parse(path.read_text())):
            yield name, line, module


def family_of(module: str) -> str | None:
    return next((f for f in FAMILY_PACKAGES if module == f or module.startswith(f + ".")), None)


def test_each_family_is_a_package_that_imports_no_other_family():
    crossing = [f"{name}:{line} imports {module}" for name, line, module in nmt_imports()
                if family_of(name) and family_of(module) and family_of(module) != family_of(name)]
    assert crossing == []


def test_the_shared_model_modules_import_no_family():
    """repair.nmt's own modules and the CTranslate2 runtime (repair.nmt.ct2) are what families share: they import
    none of them."""
    climbing = [f"{name}:{line} imports {module}" for name, line, module in nmt_imports()
                if family_of(name) is None and family_of(module)]
    assert climbing == []


def test_every_family_package_exists_and_registers_its_families():
    from repair.face import FAMILIES

    assert all((PACKAGE.parent / f.replace(".", "/") / "__init__.py").is_file() for f in FAMILY_PACKAGES)
    homes = {name: family_of(where.partition(":")[0]) for name, where in FAMILIES.items()}
    assert None not in homes.values() and set(homes.values()) == set(FAMILY_PACKAGES), homes
