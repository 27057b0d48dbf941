"""The purity benchmark's --input mode: a process tree's memory and each stage's growth from its rows."""

import os
import subprocess
import sys

from repair.bench.purity_input import growth_by_stage, tree_rss_mb


def row(sentences, **seconds):
    return {"work": sentences, "seconds_by_stage": {**seconds, "total": sum(seconds.values())},
            "cpu_seconds": sum(seconds.values()), "peak_tree_rss_mb": 500.0}


def test_each_stage_grows_by_its_own_seconds_against_the_sentences():
    growth = growth_by_stage([row(100, translation=10.0, suggestions=5.0), row(1000, translation=100.0, suggestions=5.0)])
    assert growth["translation"] == 1.0 and growth["suggestions"] == 0.0
    assert growth["peak_tree_rss_mb"] == 0.0 and "pair_construction" not in growth  # a stage no row has


def test_the_tree_memory_counts_the_children_too():
    child = subprocess.Popen([sys.executable, "-c", "x = bytearray(200 * 2 ** 20); import time; time.sleep(30)"])
    try:
        import time

        for _ in range(100):  # until the child has its 200 MB
            alone, tree = tree_rss_mb(child.pid), tree_rss_mb(os.getpid())
            if alone > 200:
                break
            time.sleep(0.1)
        assert alone > 200 and tree > alone
    finally:
        child.kill()
        child.wait()
