"""The review page in a real Chromium: keyboard only, kill and restart, escaping, the token."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import make_issue
from test_nmt import corpus, data_dir, trained, translator  # noqa: F401 - fixtures of the tiny model (the memory test)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
REPO = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")


def issue(container, ct, rti, rt, missing=()):
    return make_issue(container, ct, rti, rt, missing)


SCRIPT = "<script>window.__xss = 1</script>"
ISSUES = [
    issue("chummy bilateral talks with Mr. Trump", "与特朗普先生的双边会谈", "chummy bilateral talks", "亲切的双边会谈", "亲切的"),
    issue("the clever boy's dog", "男孩的聪明的狗", "the clever boy", "聪明的男孩", "聪明"),
    issue(f"a {SCRIPT} test", f"一个{SCRIPT}测试", SCRIPT, '<img src=x onerror="window.__xss = 2">脚本', ["脚", "本"]),
    issue("the old man read a long letter", "老人读了一封信", "a long letter", "一封长信", ["长"]),
]


class Server:
    """`python -m repair.review RUN_DIR --port 0` in a subprocess; `url` is the one it prints."""

    def __init__(self, run_dir: Path):
        env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen([sys.executable, "-m", "repair.review", str(run_dir), "--port", "0"],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO)
        deadline = time.time() + 20
        line = ""
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            m = re.search(r"http://127\.0\.0\.1:\d+/#token=[\w-]+", line)
            if m:
                self.url = m.group(0)
                return
            if self.proc.poll() is not None:
                break
        self.proc.kill()
        raise AssertionError(f"the review server did not start: {line!r}")

    def kill(self):
        self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def run_dir(tmp_path):
    (tmp_path / "issues.jsonl").write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in ISSUES),
                                           encoding="utf-8")
    return tmp_path


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def open_page(browser, url):
    # CSP bypassed: escaping alone must keep the markup in the texts from running
    page = browser.new_page(viewport={"width": 1400, "height": 900}, bypass_csp=True)
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    page.wait_for_selector("#list .item")
    return page, errors


def wait_text(page, selector, text, start=False):
    """Wait until the element's text begins with (or contains) `text`: Playwright's own assertion, which needs no
    eval in the page, so a page whose Content-Security-Policy forbids eval can be waited on too."""
    pattern = re.compile("^" + re.escape(text) if start else re.escape(text))
    sync_api.expect(page.locator(selector)).to_have_text(pattern, timeout=30_000)


def serve_in_thread(issues, review_dir, **options):
    """The loop's page (serve_review with `options`) in a thread; (the thread, the URL it prints)."""
    import threading

    from repair.review.web import serve_review

    ready = threading.Event()
    box: dict = {}
    thread = threading.Thread(target=serve_review, args=(issues, review_dir), daemon=True,
                              kwargs={"port": 0, **options,
                                      "on_ready": lambda url: (box.setdefault("url", url), ready.set())})
    thread.start()
    assert ready.wait(60), "the review server did not start"
    return thread, box["url"]


def save_the_last_and_finish(page, thread, errors, review_dir, issues):
    """Kind 1 and save on the last of two issues, Finish; the page's thread ended with no page error; the
    corrections as the loop reads them."""
    from repair.review.store import load_corrections

    kb = page.keyboard
    kb.press("1")
    kb.press("Enter")
    wait_text(page, "#progress-text", "Judged 2 of 2")
    kb.press("Shift+F")
    kb.press("Enter")
    page.wait_for_selector("#done:not([hidden])")
    thread.join(30)
    assert not thread.is_alive() and errors == []
    return load_corrections(review_dir / "corrections.jsonl", {i["id"]: i for i in issues})[0]


def status(page):
    return page.text_content("#status")


def test_judge_with_the_keyboard_kill_restart_and_finish(browser, run_dir):
    server = Server(run_dir)
    try:
        page, errors = open_page(browser, server.url)
        kb = page.keyboard
        # 1: the container leaves out "chummy": wrong, under-translation, corrected by typing
        kb.press("c")
        kb.press("1")
        kb.press("e")
        kb.press("Home")
        kb.type("亲切的")  # "亲切的与特朗普…" is no poetry, but it is an edit
        kb.press("Control+Enter")
        wait_text(page, "#position", "Issue 2", start=True)
        # 2: a false positive
        kb.press("n")
        kb.press("Enter")
        wait_text(page, "#position", "Issue 3", start=True)
        # 3: the markup in the texts shows as text and does not run
        assert page.text_content("#rti-source") == SCRIPT
        assert page.text_content("#rti-translation").startswith("<img src=x")
        assert page.evaluate("document.querySelectorAll('main script, main img').length") == 0
        assert page.evaluate("window.__xss === undefined")
        kb.press("r")
        kb.press("3")
        kb.press("e")
        kb.press("Control+a")
        kb.type("脚本标记")
        kb.press("Escape")
        kb.press("Enter")
        wait_text(page, "#position", "Issue 4", start=True)
        assert "Judged 3 of 4" in page.text_content("#progress-text")
        assert "precision 0.67" in page.text_content("#progress-text")
        # a POST without the token is refused
        refused = page.evaluate("""async () => (await fetch('/api/judge', {method: 'POST',
            headers: {'Content-Type': 'application/json'},
            body: JSON.stringify({issue: document.querySelector('#meta').textContent.split('id ')[1], wrong: []})})).status""")
        assert refused == 403
        # the token came in the address's #fragment only: gone from the address bar, kept for a reload
        assert page.evaluate("location.hash") == ""
        page.reload()
        wait_text(page, "#progress-text", "Judged 3 of 4")
        # the page without the token says where to get it
        bare = browser.new_page()
        bare.goto(server.url.split("#")[0])
        wait_text(bare, "#progress-text", "#token=")
        assert errors == []
    finally:
        server.kill()
    lines = (run_dir / "review" / "judgments.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(s)["wrong"] for s in lines] == [["container"], [], ["rti"]]

    server = Server(run_dir)
    try:
        page, errors = open_page(browser, server.url)
        assert "Judged 3 of 4" in page.text_content("#progress-text")
        assert page.text_content("#position").startswith("Issue 4")  # the first one not judged yet
        dots = page.eval_on_selector_all("#list .dot", "ds => ds.map(d => d.className)")
        assert dots == ["dot bad", "dot ok", "dot bad", "dot todo"]
        page.keyboard.press("k")
        assert status(page) == "Saved · RTI wrong · word/phrase mistranslation"
        page.keyboard.press("k")
        page.keyboard.press("k")
        assert page.input_value("#corr-container") == "亲切的与特朗普先生的双边会谈"
        page.keyboard.press("u")
        page.keyboard.press("n")
        page.keyboard.press("s")
        wait_text(page, "#progress-text", "Judged 4 of 4")
        page.keyboard.press("k")  # the screenshot shows an issue with an error marked
        page.wait_for_timeout(300)
        page.screenshot(path="/tmp/review.png")
        with page.expect_download() as download:
            page.keyboard.press("x")
        exported = Path(download.value.path()).read_text(encoding="utf-8-sig").splitlines()
        assert exported[0].startswith("id,relation,role_1,source_1,") and len(exported) == 5
        page.keyboard.press("Shift+F")
        page.keyboard.press("Enter")
        page.wait_for_selector("#done:not([hidden])")
        assert server.proc.wait(15) == 0
        assert errors == []
    finally:
        if server.proc.poll() is None:
            server.kill()
    corrections = [json.loads(s) for s in (run_dir / "review" / "corrections.jsonl").read_text().splitlines()]
    assert [(c["correction"], c["kind"]) for c in corrections] == [
        ("亲切的与特朗普先生的双边会谈", "under-translation"), ("脚本标记", "word/phrase mistranslation")]


REPLACE = {"id": "0123456789ab", "relation": "replace", "distance": 2, "sentence": "the red cat sat on the mat .",
           "evidence": ["坐", "站"], "replaced": ["cat", "dog"], "tag": "NN",
           "sides": [{"role": "original", "source": "the red cat sat on the mat .", "translation": "红猫坐在垫子上。"},
                     {"role": "mutant", "source": "the red dog sat on the mat .", "translation": "红狗站在垫子上。"}]}


def test_both_relations_on_one_page(browser, tmp_path):
    """An RTI issue and a replacement issue: each shows its own sides and keys; O and M judge the second."""
    (tmp_path / "issues.jsonl").write_text("".join(json.dumps(i, ensure_ascii=False) + "\n"
                                                   for i in (ISSUES[1], REPLACE)), encoding="utf-8")
    server = Server(tmp_path)
    try:
        page, errors = open_page(browser, server.url)
        kb = page.keyboard
        assert page.is_visible("#wrong-container") and page.is_visible("#wrong-rti")
        kb.press("n")
        kb.press("Enter")
        wait_text(page, "#position", "Issue 2", start=True)
        assert page.text_content("#meta").startswith("replace")
        assert page.text_content("#original-source") == REPLACE["sides"][0]["source"]
        assert page.text_content("#pair-mutant mark") == "dog"  # the new word marked in the mutant
        assert "O Original wrong" in page.text_content("#keys") and "M Mutant wrong" in page.text_content("#keys")
        assert not page.query_selector("#wrong-rti")
        kb.press("c")  # not a side of this issue: nothing happens
        kb.press("m")
        kb.press("3")
        kb.press("e")
        kb.press("Control+a")
        kb.type("红狗坐在垫子上。")
        kb.press("Control+Enter")
        wait_text(page, "#progress-text", "Judged 2 of 2")
        assert not errors
    finally:
        server.kill()
    lines = [json.loads(s) for s in (tmp_path / "review" / "judgments.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [(j["wrong"], j["corrections"]) for j in lines] == [([], {}), (["mutant"], {"mutant": "红狗坐在垫子上。"})]
    (c,) = [json.loads(s) for s in (tmp_path / "review" / "corrections.jsonl").read_text(encoding="utf-8").splitlines()]
    assert c["source"] == "the red dog sat on the mat ." and c["issues"] == [REPLACE["id"]]


def test_a_suggestion_accepted_with_its_key_reaches_fine_tuning(browser, tmp_path):
    """The best suggestion shows under the model's translation with what it adds marked and its origin; A copies
    it into the edit box (marking its side wrong); saved, the correction records how it was made and is what
    fine-tuning learns."""
    from repair.review.store import load_corrections
    from repair.stages.finetune import FinetuneSettings, finetune_pairs

    origin = "the container translated again to contain the RTI's translation (constrained beam search)"
    first = {**ISSUES[0], "suggestions": [
        {"role": "container", "text": "与特朗普先生的亲切的双边会谈", "origin": origin, "score": -0.41},
        {"role": "rti", "text": "双边会谈", "origin": "the RTI's n-best translation", "score": -0.9}]}
    second = {**ISSUES[3], "suggestions": [{"role": "container", "text": "老人读了一封长信", "origin": origin, "score": -0.3}]}
    (tmp_path / "issues.jsonl").write_text("".join(json.dumps(i, ensure_ascii=False) + "\n"
                                                   for i in (first, second, ISSUES[1])), encoding="utf-8")
    server = Server(tmp_path)
    try:
        page, errors = open_page(browser, server.url)
        kb = page.keyboard
        assert "A use the suggestion" in page.text_content("#keys")
        assert page.text_content("#container-suggestion ins") == "亲切的"  # what it adds to the model's translation
        assert origin in page.text_content("#container-suggestion")
        assert page.is_visible("#rti-suggestion") and not page.is_visible("#fix-container")
        kb.press("a")  # the issue's best suggestion: the container's
        assert page.input_value("#corr-container") == "与特朗普先生的亲切的双边会谈"
        assert page.get_attribute("#wrong-container", "aria-pressed") == "true"
        kb.press("1")
        kb.press("Enter")
        wait_text(page, "#position", "Issue 2", start=True)
        # accepted, then one character changed: an edit of one character
        kb.press("a")
        kb.press("e")
        kb.press("Backspace")
        kb.type("。")
        kb.press("1")  # in the text box: typed, not a kind
        kb.press("Escape")
        kb.press("1")
        kb.press("Enter")
        wait_text(page, "#position", "Issue 3", start=True)
        assert not page.is_visible("#container-suggestion")  # no suggestion: nothing shown, A says so
        kb.press("a")
        assert "No suggestion" in page.text_content("#message")
        assert "Judged 2 of 3" in page.text_content("#progress-text")
        assert errors == []
    finally:
        server.kill()
    by_id = {i["id"]: i for i in (first, second, ISSUES[1])}
    corrections, _ = load_corrections(tmp_path / "review" / "corrections.jsonl", by_id)
    assert [(c["correction"], c["origin"], c["typed"]) for c in corrections] == [
        ("与特朗普先生的亲切的双边会谈", "suggestion", 0), ("老人读了一封长。1", "edited", 2)]
    settings = FinetuneSettings(lr=1e-4, patience=1, max_epoch=1, repeat=2, replay=0, keep=0, seed=1)
    pairs = finetune_pairs(settings, corrections, None)
    assert pairs.count((first["sides"][0]["source"], "与特朗普先生的亲切的双边会谈")) == 2


@pytest.mark.slow
def test_the_review_memory_offers_a_later_issue_what_a_correction_taught(browser, translator, tmp_path):  # noqa: F811
    """On the loop's page (a model at hand): a correction that puts a word in is offered, as a suggestion from
    the review memory, on a later issue whose source shares the word; A takes it."""
    from repair.review.memory import MemorySuggester, ReviewMemory

    first, later = "The old horse helps the farmer .", "The farmer sees the cat ."
    plain = dict(zip([first, later], translator.translate([first, later])))
    issues = [make_issue(first, plain[first], "the farmer", "农民", ["老师"]),
              make_issue(later, plain[later], "the cat", "猫", ["老师"])]
    memory = MemorySuggester(translator, ReviewMemory(["的", "。"], rare=0), beam=4, slack=1000)
    thread, url = serve_in_thread(issues, tmp_path / "review", memory=memory)
    page, errors = open_page(browser, url)
    kb = page.keyboard
    assert not page.is_visible("#container-suggestion")  # nothing learnt yet
    kb.press("c")
    kb.press("1")
    kb.press("e")
    kb.press("End")
    kb.type("老师")
    kb.press("Control+Enter")
    wait_text(page, "#position", "Issue 2", start=True)
    shown = page.text_content("#container-suggestion")
    assert "review memory" in shown and "farmer" in shown
    kb.press("a")
    taken = page.input_value("#corr-container")
    assert "老师" in taken and taken != plain[later]
    corrections = save_the_last_and_finish(page, thread, errors, tmp_path / "review", issues)
    assert [(c["source"], c["correction"], c["origin"]) for c in corrections] == [
        (first, plain[first] + "老师", "edited"), (later, taken, "suggestion")]


# Each step's milliseconds, from the key's keydown (caught first, on the window) until the issue it leads to is in
# #position and the page has drawn the frame after it (a frame callback, then a task); and the key's handlers'
# own milliseconds (until the keydown is back at the window: the page's script, without the frame it waits for).
STEP_TIMER = """() => {
  window.__steps = [];
  window.addEventListener("keydown", (e) => { window.__t0 = performance.now(); window.__key = e.key; }, true);
  window.addEventListener("keydown", () => { window.__t1 = performance.now(); });
  new MutationObserver(() => {
    const t0 = window.__t0, key = window.__key;
    if (t0 === undefined) return;
    window.__t0 = undefined;
    requestAnimationFrame(() => setTimeout(() => window.__steps.push([key, performance.now() - t0, window.__t1 - t0])));
  }).observe(document.getElementById("position"), {childList: true, characterData: true, subtree: true});
}"""


def timed_press(page, key: str, shows: str) -> tuple[float, float]:
    """Press `key`, wait until #position reads `shows` and the step is timed: (the step's milliseconds, its
    handlers')."""
    n = page.evaluate("window.__steps.length")
    page.keyboard.press(key)
    wait_text(page, "#position", shows, start=True)
    page.wait_for_function(f"window.__steps.length > {n} && window.__steps.at(-1)[0] === {json.dumps(key)}")
    return tuple(page.evaluate("window.__steps.at(-1).slice(1)"))


def figures(timed: list[tuple[float, float]]) -> str:
    def median_max(ms):
        ordered = sorted(ms)
        return f"median {ordered[len(ordered) // 2]:.1f} ms, max {ordered[-1]:.1f} ms"

    return (f"{median_max([t[0] for t in timed])} over {len(timed)} (the key's handlers: "
            f"{median_max([t[1] for t in timed])})")


def test_two_thousand_issues_page_and_save_step_by_step(browser, tmp_path, capsys):
    """2,000 issues, 1,500 judged before the page opens (a review near its end, 1,125 corrections): J and K page
    through them and Enter saves, each step timed in Chromium and the figures printed (the aim: under 200 ms a
    step; not asserted, timings move with the machine). What is asserted: each step shows the issue it should,
    and each save is in the log."""
    from helpers import synthetic_issues
    from repair.review.store import CorrectionStore, read_judgments

    issues = synthetic_issues(2000)
    (tmp_path / "issues.jsonl").write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in issues),
                                           encoding="utf-8")
    with CorrectionStore(tmp_path / "review", issues) as store:
        store.record_many([(i["id"], ["container"] if k % 4 else [], "word/phrase mistranslation",
                            {"container": i["sides"][0]["translation"].replace("。", "！")}, None)
                           for k, i in enumerate(issues[:1500])])
    server = Server(tmp_path)
    try:
        began = time.perf_counter()
        page, errors = open_page(browser, server.url)
        wait_text(page, "#position", "Issue 1501 of 2000")
        opened = 1000 * (time.perf_counter() - began)
        page.evaluate(STEP_TIMER)
        steps = {"J": [timed_press(page, "j", f"Issue {1502 + n} ") for n in range(40)]}
        steps["K"] = [timed_press(page, "k", f"Issue {1540 - n} ") for n in range(40)]
        steps["save"] = []
        for n in range(20):  # from issue 1501 on: a suggestion taken where there is one, else no error
            if issues[1500 + n].get("suggestions"):
                page.keyboard.press("a")
                page.keyboard.press("1")
            else:
                page.keyboard.press("n")
            steps["save"].append(timed_press(page, "Enter", f"Issue {1502 + n} "))
        wait_text(page, "#progress-text", "Judged 1520 of 2000")
        assert errors == []
    finally:
        server.kill()
    latest = read_judgments(tmp_path / "review")
    assert len(latest) == 1520 and all(issues[1500 + n]["id"] in latest for n in range(20))
    with capsys.disabled():
        print(f"\n2,000 issues: page opened in {opened:.0f} ms (navigation to the first issue shown)")
        for name, ms in steps.items():
            print(f"2,000 issues: {name} step {figures(ms)}")


def sentence_and_phrases_page(browser, tmp_path):
    """test_align's two issues (a sentence and the phrases cut from it) on the page, with the word alignment of a
    small corpus: (issues, the server's thread, the page, its errors)."""
    from repair.review.align import PhraseAligner
    from test_align import PARTS, WHOLE, small_corpus

    aligner = PhraseAligner.train(small_corpus(), tmp_path / "align")
    issues = [WHOLE, PARTS]
    thread, url = serve_in_thread(issues, tmp_path / "review", aligner=aligner)
    page, errors = open_page(browser, url)
    return issues, thread, page, errors


def test_a_corrected_sentence_prefills_the_phrases_cut_from_it(browser, tmp_path):
    """With the run's word alignment: the phrase sides of a later issue cut from a sentence the reviewer corrected
    open with the stretch of that correction their words align to; saved as they are, they are the corrections."""
    from test_align import SENTENCE

    issues, thread, page, errors = sentence_and_phrases_page(browser, tmp_path)
    kb = page.keyboard
    kb.press("c")
    kb.press("1")
    kb.press("e")
    kb.press("Control+a")
    kb.type("我们想要一个白色的椅子。")
    kb.press("Control+Enter")
    wait_text(page, "#position", "Issue 2", start=True)
    kb.press("c")
    assert page.input_value("#corr-container") == "一个白色的椅子"
    assert "align" in page.text_content("#hint-container")
    kb.press("r")
    assert page.input_value("#corr-rti") == "白色的椅子"
    corrections = save_the_last_and_finish(page, thread, errors, tmp_path / "review", issues)
    assert {(c["source"], c["correction"]) for c in corrections} == {
        (SENTENCE, "我们想要一个白色的椅子。"), ("a white chair", "一个白色的椅子"), ("white chair", "白色的椅子")}


def test_a_phrase_of_the_same_issue_opens_with_the_projection_of_its_sentence_s_correction(browser, tmp_path):
    """The sentence corrected (not yet saved), the issue's phrase side marked wrong opens with the stretch of that
    correction its words align to; a phrase side the reviewer typed in is left as typed."""
    from test_align import SENTENCE

    issues, thread, page, errors = sentence_and_phrases_page(browser, tmp_path)
    kb = page.keyboard
    kb.press("c")
    kb.press("e")
    kb.press("Control+a")
    kb.type("我们想要一个白色的椅子。")
    kb.press("Escape")
    kb.press("r")
    page.wait_for_function("document.querySelector('#corr-rti').value === '一个白色的椅子'", timeout=30000)
    assert "align" in page.text_content("#hint-rti")
    kb.press("1")
    kb.press("Enter")
    wait_text(page, "#position", "Issue 2", start=True)
    kb.press("r")  # issue 2's RTI: pre-filled from the saved sentence; typed over, a new draft leaves it as typed
    kb.press("e")
    kb.press("Control+a")
    kb.type("白色椅子")
    kb.press("Escape")
    assert page.input_value("#corr-rti") == "白色椅子"
    kb.press("c")
    assert page.input_value("#corr-container") == "一个白色的椅子"
    corrections = save_the_last_and_finish(page, thread, errors, tmp_path / "review", issues)
    assert {(c["source"], c["correction"]) for c in corrections} == {
        (SENTENCE, "我们想要一个白色的椅子。"), ("a white chair", "一个白色的椅子"), ("white chair", "白色椅子")}
