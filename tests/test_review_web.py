"""The review page over HTTP: token, Host check, judgments saved, export, finish."""

import csv
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from repair.errors import UserError
from repair.review.__main__ import locate, read_issues
from repair.review.web import bind, create_app, serve_review
from helpers import make_issue

REPO = Path(__file__).resolve().parents[1]


def issue(container, ct, rti, rt, missing=()):
    return make_issue(container, ct, rti, rt, missing)


CHUMMY = issue("chummy bilateral talks with Mr. Trump", "与特朗普先生的双边会谈", "chummy bilateral talks", "亲切的双边会谈", "亲切的")
BOY = issue("the clever boy's dog", "男孩的聪明的狗", "the clever boy", "聪明的男孩", "聪明")
ISSUES = [CHUMMY, BOY]


@pytest.fixture
def app(tmp_path):
    return create_app(ISSUES, tmp_path / "review")


@pytest.fixture
def client(app):
    return TestClient(app, base_url="http://127.0.0.1")


def auth(app):
    return {"X-Review-Token": app.state.token}


def test_page_never_hands_out_the_token_and_forbids_inline_scripts(app, client):
    r = client.get("/")
    assert r.status_code == 200 and app.state.token not in r.text
    assert app.state.token not in client.get("/static/app.js").text
    assert "script-src 'self'" in r.headers["content-security-policy"]
    assert client.get("/static/app.js").headers["content-type"].startswith("text/javascript")


def test_no_request_reaches_the_file_system_as_a_path(client):
    for path in ("/static/../web.py", "/static/..%2Fweb.py", "/static/index.html", "/static/%2Fetc%2Fpasswd"):
        assert client.get(path).status_code == 404


def test_api_without_the_token_is_refused(app, client, tmp_path):
    body = {"issue": BOY["id"], "wrong": []}
    assert client.post("/api/judge", json=body).status_code == 403
    assert client.post("/api/judge", json=body, headers={"X-Review-Token": "guess"}).status_code == 403
    assert client.get("/api/state").status_code == 403
    assert client.post("/api/finish").status_code == 403
    assert not (tmp_path / "review" / "judgments.jsonl").exists()
    assert not app.state.finished


def test_other_host_header_is_refused(app):
    evil = TestClient(app, base_url="http://attacker.example")
    assert evil.get("/").status_code == 400


def test_judge_saves_and_state_shows_it_after_a_restart(app, client, tmp_path):
    r = client.post("/api/judge", headers=auth(app), json={
        "issue": CHUMMY["id"], "wrong": ["container"], "kind": "under-translation",
        "corrections": {"container": "与特朗普先生的亲切的双边会谈"}})
    assert r.status_code == 200, r.text
    assert r.json()["stats"] == {"judged": 1, "with_error": 1, "precision": 1.0, "total": 2}
    r = client.post("/api/judge", headers=auth(app), json={"issue": BOY["id"], "wrong": []})
    assert r.json()["stats"]["precision"] == 0.5
    js = [json.loads(s) for s in (tmp_path / "review" / "judgments.jsonl").read_text().splitlines()]
    assert [j["issue"] for j in js] == [CHUMMY["id"], BOY["id"]]

    restarted = create_app(ISSUES, tmp_path / "review")
    state = TestClient(restarted, base_url="http://127.0.0.1").get("/api/state", headers=auth(restarted)).json()
    assert set(state["judgments"]) == {CHUMMY["id"], BOY["id"]}
    assert state["prefill"] == {CHUMMY["container"]: "与特朗普先生的亲切的双边会谈"}
    assert state["stats"]["judged"] == 2



def test_a_save_answers_the_pre_fills_of_its_sources_only_and_a_withdrawn_one_as_none(tmp_path):
    """The page pre-fills a source's edit box with its latest correction; a save answers the pre-fills it can
    change (its sides' sources'), not every one: a judgment revised to no error withdraws its correction (None),
    and a source corrected in another issue keeps that one."""
    trump = issue(CHUMMY["container"], CHUMMY["container_translation"], "Mr. Trump", "特朗普先生")
    app = create_app([CHUMMY, BOY, trump], tmp_path / "review")
    client = TestClient(app, base_url="http://127.0.0.1")

    def judge(iss, wrong, fixed=None):
        body = {"issue": iss["id"], "wrong": wrong, "kind": "under" if wrong else None,
                "corrections": {w: fixed for w in wrong}}
        return client.post("/api/judge", headers=auth(app), json=body).json()["prefill"]

    assert judge(BOY, ["container"], "聪明男孩的狗") == {BOY["container"]: "聪明男孩的狗", BOY["rti"]: None}
    assert judge(CHUMMY, ["container"], "甲") == {CHUMMY["container"]: "甲", CHUMMY["rti"]: None}
    assert judge(trump, ["container"], "乙") == {CHUMMY["container"]: "乙", "Mr. Trump": None}
    assert judge(trump, []) == {CHUMMY["container"]: "甲", "Mr. Trump": None}  # CHUMMY's correction again
    assert judge(BOY, []) == {BOY["container"]: None, BOY["rti"]: None}
    state = client.get("/api/state", headers=auth(app)).json()
    assert state["prefill"] == {CHUMMY["container"]: "甲"}
    app.state.store.close()

@pytest.mark.parametrize("body, message", [
    ({"issue": "nope", "wrong": []}, "unknown issue"),
    ({"issue": BOY["id"], "wrong": ["sentence"]}, "bad judgment"),
    ({"issue": BOY["id"], "wrong": ["rti"], "kind": "under-translation", "corrections": {"rti": "聪明的男孩"}},
     "still the model's translation"),
    ({"issue": BOY["id"], "wrong": ["rti"], "kind": None, "corrections": {"rti": "聪明男孩"}}, "no kind"),
    ({"issue": BOY["id"], "wrong": ["rti"], "kind": "under", "corrections": {"rti": "聪明男孩"}, "how": ["typed"]},
     "'how' must map"),
    ({"issue": BOY["id"], "wrong": ["rti"], "kind": "under", "corrections": {"rti": "聪明男孩"},
      "how": {"rti": {"origin": "pasted", "typed": 3}}}, "origin"),
    ({"issue": BOY["id"], "wrong": ["rti"], "kind": "under", "corrections": {"rti": "聪明男孩"},
      "how": {"rti": {"origin": "typed", "typed": -1}}}, "characters typed"),
])
def test_bad_judgments_get_a_message(app, client, body, message):
    r = client.post("/api/judge", headers=auth(app), json=body)
    assert r.status_code == 400 and message in r.json()["error"]


@pytest.mark.parametrize("content", [
    b"[]", b"[1, 2]", b'"text"', b"null", b"[" * 100_000 + b"]" * 100_000, b'{"issue": ' * 50_000, b"\xff\xfe{",
    b"not json",
    json.dumps({"issue": [1], "wrong": []}).encode(),
    json.dumps({"issue": {"a": 1}, "wrong": []}).encode(),
    json.dumps({"issue": BOY["id"], "wrong": {"rti": 1}}).encode(),
    json.dumps({"issue": BOY["id"], "wrong": [["rti"]]}).encode(),
    json.dumps({"issue": BOY["id"], "wrong": ["rti"], "kind": 3, "corrections": {"rti": "聪明男孩"}}).encode(),
    json.dumps({"issue": BOY["id"], "wrong": ["rti"], "kind": ["x"], "corrections": {"rti": "聪明男孩"}}).encode(),
    json.dumps({"issue": BOY["id"], "wrong": ["rti"], "kind": "under", "corrections": ["聪明男孩"]}).encode(),
    json.dumps({"issue": BOY["id"], "wrong": ["rti"], "kind": "under", "corrections": {"rti": 5}}).encode(),
])
def test_malformed_bodies_get_400_with_a_message(app, client, tmp_path, content):
    r = client.post("/api/judge", headers={**auth(app), "Content-Type": "application/json"}, content=content)
    assert r.status_code == 400 and r.json()["error"], r.text
    assert not (tmp_path / "review" / "judgments.jsonl").exists()


def test_a_body_over_the_limit_is_refused(app, client, tmp_path):
    big = {"issue": BOY["id"], "wrong": ["rti"], "kind": "under", "corrections": {"rti": "男" * 1_000_000}}
    r = client.post("/api/judge", headers=auth(app), json=big)
    assert r.status_code == 413 and "larger than" in r.json()["error"]

    def chunks():  # no Content-Length: counted as it streams
        for _ in range(30):
            yield b" " * 100_000
    r = client.post("/api/judge", headers={**auth(app), "Content-Type": "application/json"}, content=chunks())
    assert r.status_code == 413
    assert not (tmp_path / "review" / "judgments.jsonl").exists()


def test_line_breaks_are_refused_and_odd_text_round_trips_through_the_page(app, client, tmp_path):
    body = {"issue": BOY["id"], "wrong": ["rti"], "kind": "under", "corrections": {"rti": "聪明的\u2028男孩"}}
    r = client.post("/api/judge", headers=auth(app), json=body)
    assert r.status_code == 400 and "U+2028 LINE SEPARATOR" in r.json()["error"]
    text = "聪明的男孩😀 שלום e\u0301 " + "男" * 100_000
    body["corrections"]["rti"] = text
    assert client.post("/api/judge", headers=auth(app), json=body).status_code == 200
    app.state.store.close()
    restarted = create_app(ISSUES, tmp_path / "review")
    state = TestClient(restarted, base_url="http://127.0.0.1").get("/api/state", headers=auth(restarted)).json()
    assert state["judgments"][BOY["id"]]["corrections"]["rti"] == text


def test_security_headers_on_every_response(tmp_path):
    app = create_app(ISSUES, tmp_path / "review")

    def boom(*args, **kwargs):
        raise RuntimeError("a bug")

    app.state.store.record = boom
    client = TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False)
    body = {"issue": BOY["id"], "wrong": []}
    responses = [client.get("/"), client.get("/nowhere"), client.get("/static/nothing.js"),
                 client.put("/api/judge"), client.get("/api/state"),
                 TestClient(app, base_url="http://attacker.example").get("/"),
                 client.post("/api/judge", headers=auth(app), json=body)]
    assert [r.status_code for r in responses] == [200, 404, 404, 405, 403, 400, 500]
    for r in responses:
        assert "frame-ancestors 'none'" in r.headers["content-security-policy"], r.status_code
        assert r.headers["x-content-type-options"] == "nosniff" and r.headers["cache-control"] == "no-store"
    assert "Traceback" not in responses[-1].text and "a bug" not in responses[-1].text


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.7", "review.example"])
def test_beyond_loopback_is_refused_without_public(tmp_path, host):
    with pytest.raises(UserError, match=r"review.public=true \(--public\)"):
        serve_review(ISSUES, tmp_path / "review", host=host, port=0)
    assert not (tmp_path / "review").exists()


def test_the_command_refuses_any_interface_without_public(tmp_path):
    write_issues(tmp_path / "issues.jsonl")
    r = subprocess.run([sys.executable, "-m", "repair.review", str(tmp_path), "--host", "0.0.0.0", "--port", "0"],
                       cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "review.public=true (--public)" in r.stderr and "Traceback" not in r.stderr


def test_public_warns_keeps_the_host_check_and_hands_the_token_only_in_the_address(tmp_path, capsys):
    box, ready = {}, threading.Event()

    def on_ready(url):
        box["url"] = url
        ready.set()

    def serve():
        box["stats"] = serve_review(ISSUES, tmp_path / "review", host="0.0.0.0", port=0, public=True,
                                    hosts=["review.example"], on_ready=on_ready)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    assert ready.wait(10)
    assert "WARNING: serving on 0.0.0.0" in capsys.readouterr().err
    port = re.search(r":(\d+)/", box["url"]).group(1)
    _, token = page_token(box["url"].replace(f"//{socket.gethostname()}:", "//127.0.0.1:"))
    base = f"http://127.0.0.1:{port}/"
    for name, status in (("attacker.example", 400), ("review.example", 200), (socket.gethostname(), 200)):
        r = httpx.get(base, headers={"Host": f"{name}:{port}"}, timeout=5)
        assert r.status_code == status, name
        assert token not in r.text
    httpx.post(base + "api/finish", headers={"X-Review-Token": token}, timeout=5).raise_for_status()
    t.join(10)
    assert not t.is_alive()


def test_a_second_writer_is_told_who_holds_the_folder(tmp_path):
    from repair.review.sheet import file_review

    write_issues(tmp_path / "issues.jsonl")
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    first = subprocess.Popen([sys.executable, "-m", "repair.review", str(tmp_path), "--port", "0"], cwd=REPO,
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url, token = page_token(re.search(r"http://\S+/#token=[\w-]+", first.stdout.readline()).group(0))
        second = subprocess.run([sys.executable, "-m", "repair.review", str(tmp_path), "--port", "0"], cwd=REPO,
                                env=env, capture_output=True, text=True, timeout=60)
        assert second.returncode == 2 and "Traceback" not in second.stderr
        assert f"is open in process {first.pid} on" in second.stderr and "python -m repair.review" in second.stderr
        with pytest.raises(UserError, match=f"open in process {first.pid}"):  # review=file rerun meanwhile
            file_review(ISSUES, tmp_path / "review")
        httpx.post(url + "api/judge", headers={"X-Review-Token": token}, json={"issue": BOY["id"], "wrong": []},
                   timeout=5).raise_for_status()
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=15)
    assert [j["issue"] for j in map(json.loads, (tmp_path / "review" / "judgments.jsonl").read_text().splitlines())] \
        == [BOY["id"]]
    with pytest.raises(Exception) as e:  # the folder is free again once the first has stopped
        file_review(ISSUES, tmp_path / "review")
    assert "review:" in str(e.value) and "open in process" not in str(e.value)


def test_export_csv_and_finish(app, client, tmp_path):
    client.post("/api/judge", headers=auth(app), json={"issue": BOY["id"], "wrong": []})
    r = client.get("/api/export.csv", headers=auth(app))
    rows = list(csv.DictReader(io.StringIO(r.content.decode("utf-8-sig"))))
    assert [(x["id"], x["wrong_1"], x["wrong_2"]) for x in rows] == [
        (CHUMMY["id"], "", ""), (BOY["id"], "no", "no")]
    r = client.post("/api/finish", headers=auth(app))
    assert r.status_code == 200 and app.state.finished
    assert json.loads((tmp_path / "review" / "progress.json").read_text())["finished"] is True


# ---------------------------------------------------------------- the real server and the command


def page_token(url):
    """(address, session token) from the printed URL, once the page answers (the socket listens a moment
    before uvicorn serves)."""
    base, token = re.fullmatch(r"(http://\S+/)#token=([\w-]+)", url).groups()
    for _ in range(50):
        try:
            httpx.get(base, timeout=2).raise_for_status()
            return base, token
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError(f"{url} did not answer")


def test_serve_review_returns_the_stats_on_finish(tmp_path):
    box = {}
    ready = threading.Event()

    def on_ready(url):
        box["url"] = url
        ready.set()

    def serve():
        box["stats"] = serve_review(ISSUES, tmp_path / "review", port=0, on_ready=on_ready)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    assert ready.wait(10)
    url, token = page_token(box["url"])
    assert httpx.post(url + "api/finish", timeout=5).status_code == 403
    httpx.post(url + "api/judge", headers={"X-Review-Token": token}, json={"issue": BOY["id"], "wrong": []},
               timeout=5).raise_for_status()
    httpx.post(url + "api/finish", headers={"X-Review-Token": token}, timeout=5).raise_for_status()
    t.join(10)
    assert not t.is_alive()
    assert box["stats"] == {"judged": 1, "with_error": 0, "precision": 0.0, "total": 2}


def test_port_in_use_is_one_clear_message():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(UserError, match="choose another port"):
            bind("127.0.0.1", taken.getsockname()[1])


def write_issues(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in ISSUES), encoding="utf-8")


def test_the_command_finds_the_issues_of_a_run_folder(tmp_path):
    write_issues(tmp_path / "a" / "issues.jsonl")
    assert locate(tmp_path / "a") == (tmp_path / "a" / "issues.jsonl", tmp_path / "a" / "review")
    write_issues(tmp_path / "b" / "test" / "issues.jsonl")
    assert locate(tmp_path / "b") == (tmp_path / "b" / "test" / "issues.jsonl", tmp_path / "b" / "review")
    for k in (1, 2, 10):
        write_issues(tmp_path / "run" / f"cycle{k}" / "test" / "issues.jsonl")
    (tmp_path / "run" / "cycle10" / "review").mkdir()
    (tmp_path / "run" / "cycle10" / "review" / "done.json").write_text("{}")
    assert locate(tmp_path / "run")[1] == tmp_path / "run" / "cycle2" / "review"
    assert locate(tmp_path / "run", cycle=10)[1] == tmp_path / "run" / "cycle10" / "review"
    with pytest.raises(UserError, match="no issues.jsonl here"):
        locate(tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"}\n', encoding="utf-8")
    with pytest.raises(UserError, match=r"bad.jsonl:1: issue x lacks 'sides'"):
        read_issues(bad)


def test_ctrl_c_keeps_the_judgments_and_says_how_to_go_on(tmp_path):
    write_issues(tmp_path / "issues.jsonl")
    proc = subprocess.Popen([sys.executable, "-m", "repair.review", str(tmp_path), "--port", "0"], cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url, token = page_token(re.search(r"http://\S+/#token=[\w-]+", proc.stdout.readline()).group(0))
    httpx.post(url + "api/judge", headers={"X-Review-Token": token}, json={"issue": BOY["id"], "wrong": []},
               timeout=5).raise_for_status()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=15)
    assert proc.returncode == 2
    assert "review stopped before Finish: 1 of 2 issues judged" in err and "Traceback" not in err
    assert len((tmp_path / "review" / "judgments.jsonl").read_text().splitlines()) == 1


def test_a_replacement_issue_is_judged_by_its_own_sides(tmp_path):
    rep = {"id": "0123456789ab", "relation": "replace", "distance": 1, "sentence": "a red cat sat .", "evidence": ["站"],
           "sides": [{"role": "original", "source": "a red cat sat .", "translation": "红猫坐着。"},
                     {"role": "mutant", "source": "a red dog sat .", "translation": "红狗站着。"}]}
    app = create_app([BOY, rep], tmp_path / "review")
    client = TestClient(app, base_url="http://127.0.0.1")
    state = client.get("/api/state", headers=auth(app)).json()
    assert [r["role"] for r in state["relations"]["replace"]["roles"]] == ["original", "mutant"]
    assert [r["role"] for r in state["relations"]["rti"]["roles"]] == ["container", "rti"]
    bad = client.post("/api/judge", headers=auth(app), json={"issue": rep["id"], "wrong": ["rti"], "kind": "under",
                                                              "corrections": {"rti": "x"}})
    assert bad.status_code == 400 and "original / mutant" in bad.json()["error"]
    ok = client.post("/api/judge", headers=auth(app), json={"issue": rep["id"], "wrong": ["mutant"], "kind": "word",
                                                             "corrections": {"mutant": "红狗坐着。"}})
    assert ok.status_code == 200 and ok.json()["prefill"] == {"a red cat sat .": None, "a red dog sat .": "红狗坐着。"}
    app.state.store.close()
