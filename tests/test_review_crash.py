"""kill -9 a review server at random points while it saves: no acknowledged save is ever lost.

More rounds: `python -m repair.review.stress --rounds 200` (README, Review).
"""

from repair.review.stress import kill_rounds


def test_kill_9_during_saves_loses_no_acknowledged_save(tmp_path):
    result = kill_rounds(tmp_path, rounds=20, seed=1, log=None)
    assert result["problems"] == [] and result["violations"] == 0
    assert result["acknowledged_saves"] >= 20  # the server was saving when it was killed
