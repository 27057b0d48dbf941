"""Small helpers shared by tests: a bracketed-tree reader of their own, and issue records."""

from __future__ import annotations

from repair import issues as issue_records
from repair.issues import issue_id


def read_tree(tree: str):
    """(label, children) nodes from a bracketed tree; leaves are plain strings."""
    tokens = tree.replace("(", " ( ").replace(")", " ) ").split()
    pos = 0

    def node():
        nonlocal pos
        assert tokens[pos] == "(", f"expected ( at token {pos} of {tree}"
        label, pos = tokens[pos + 1], pos + 2
        children = []
        while tokens[pos] != ")":
            if tokens[pos] == "(":
                children.append(node())
            else:
                children.append(tokens[pos])
                pos += 1
        pos += 1
        return label, children

    root = node()
    assert pos == len(tokens), f"text after the tree's end: {tree}"
    return root


def leaves(n) -> list[str]:
    return [n] if isinstance(n, str) else [w for c in n[1] for w in leaves(c)]


def make_issue(container, ct, rti, rt, missing=(), sentence=None) -> dict:
    """An RTI issue record as the Purity stage writes it (id, relation, distance, sentence, sides, evidence),
    with the old record's keys (container, rti, ..._translation) beside them for the tests to read; the code
    under test reads only `sides`."""
    new = issue_records.make_issue("rti", container if sentence is None else sentence,
                            [("container", container, ct), ("rti", rti, rt)], len(missing), missing)
    return {**new, "container": container, "container_translation": ct, "rti": rti, "rti_translation": rt}
