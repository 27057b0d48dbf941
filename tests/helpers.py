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


# A small English-Chinese lexicon for synthetic issues: sentences of our own making, many and distinct.
_ADJECTIVES = {"old": "年老的", "young": "年轻的", "happy": "快乐的", "quiet": "安静的", "clever": "聪明的",
               "tall": "高大的", "small": "小小的", "brave": "勇敢的", "hungry": "饥饿的", "kind": "善良的",
               "busy": "忙碌的", "tired": "疲惫的", "angry": "生气的", "calm": "平静的", "famous": "著名的",
               "poor": "贫穷的", "rich": "富有的", "shy": "害羞的", "proud": "骄傲的", "lazy": "懒惰的"}
_NOUNS = {"sailor": "水手", "teacher": "老师", "farmer": "农民", "doctor": "医生", "painter": "画家",
          "driver": "司机", "pharmacist": "药剂师", "baker": "面包师", "student": "学生", "writer": "作家",
          "singer": "歌手", "soldier": "士兵", "nurse": "护士", "lawyer": "律师", "pilot": "飞行员",
          "dancer": "舞蹈家", "cook": "厨师", "judge": "法官", "poet": "诗人", "child": "孩子"}
_PLACES = {"bridge": "桥", "library": "图书馆", "river": "河", "tower": "塔", "market": "市场", "station": "车站",
           "garden": "花园", "school": "学校", "harbour": "港口", "church": "教堂"}
_VERBS = {"saw": "看见了", "helped": "帮助了", "met": "遇见了", "called": "叫了", "followed": "跟着"}


def synthetic_issues(n: int, seed: int = 1) -> list[dict]:
    """`n` distinct RTI issues of generated sentences ("the old sailor saw the happy teacher near the bridge"),
    each with its translations, the RTI's missing in the container's; every third with a suggestion."""
    import random

    rng = random.Random(seed)
    lists = [list(_ADJECTIVES), list(_NOUNS), list(_VERBS), list(_ADJECTIVES), list(_NOUNS), list(_PLACES)]
    total = 1
    for words in lists:
        total *= len(words)
    out = []
    for k, number in enumerate(rng.sample(range(total), n)):
        picked = []
        for words in lists:  # the sampled number read digit by digit, a list's length the base
            number, at = divmod(number, len(words))
            picked.append(words[at])
        a1, n1, v, a2, n2, p = picked
        rti, rt = f"the {a2} {n2}", _ADJECTIVES[a2] + _NOUNS[n2]
        wrong = _NOUNS[rng.choice([x for x in _NOUNS if x != n2])]  # the container's translation mistakes the noun
        container = f"the {a1} {n1} {v} {rti} near the {p}"
        right = f"{_ADJECTIVES[a1]}{_NOUNS[n1]}在{_PLACES[p]}附近{_VERBS[v]}{rt}。"
        ct = right.replace(_NOUNS[n2] + "。", wrong + "。")
        record = make_issue(container, ct, rti, rt, [_NOUNS[n2]])
        if k % 3 == 0:
            record["suggestions"] = [{"role": "container", "text": right, "score": -0.5,
                                      "origin": "the container translated again to contain the RTI's translation"}]
        out.append(record)
    return out
