"""The house's shape: no module imports one that sits above it, and no function runs on past a screen."""

import ast
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
