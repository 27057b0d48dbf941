// The review page. Data goes into the page as text nodes only (textContent), never as HTML.
"use strict";

// The session token comes only in the address the server printed (#token=...): a fragment is never sent
// to a server nor in a Referer. Kept for this tab, so a reload works; dropped from the address bar.
const TOKEN = (() => {
  const m = /(?:^#|&)token=([A-Za-z0-9_-]+)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem("review-token", m[1]);
    history.replaceState(null, "", location.pathname + location.search);
    return m[1];
  }
  return sessionStorage.getItem("review-token") || "";
})();
const $ = (id) => document.getElementById(id);

let issues = [];
let kinds = [];
let saved = {};      // issue id -> latest saved judgment
let drafts = {};     // issue id -> {wrong: Set of roles, noError, kind, corr: {role: text}}
let relations = {};  // relation name -> {roles: [{role, label, sub, key}], evidence}
let shownRelation = null;
let prefill = {};    // source text -> its latest correction in this review
let memory = {};     // issue id -> role -> the review memory's suggestion (what earlier corrections taught)
let projected = {};  // phrase source -> {text, confidence, sentence}: its sentence's correction, projected onto it
let stats = null;
let current = 0;
let marked = -1;     // the list's row marked current
let finished = false;

async function api(path, body) {
  const opts = { headers: { "X-Review-Token": TOKEN } };
  if (body !== undefined) {
    opts.method = "POST";
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const res = await fetch(path, opts);
  if (!res.ok) {
    let msg = res.status + " " + res.statusText;
    try { msg = (await res.json()).error || msg; } catch (e) { /* not JSON */ }
    throw new Error(msg);
  }
  return res;
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

// ---------------------------------------------------------------- drafts

function draftFrom(j) {
  // start: per side, the text its edit box started from; from: "suggestion" or "prefill"; emptied: the box was
  // cleared on the way (the correction typed afresh). They say how the correction was made when it is saved.
  const d = { wrong: new Set(), noError: false, kind: null, corr: {}, start: {}, from: {}, emptied: {}, dirty: false };
  if (j) {
    j.wrong.forEach((s) => d.wrong.add(s));
    d.noError = j.wrong.length === 0;
    d.kind = j.kind;
    Object.entries(j.corrections).forEach(([s, t]) => { d.corr[s] = t; d.start[s] = t; d.from[s] = "prefill"; });
  }
  return d;
}

function suggestionFor(iss, role) {
  const remembered = (memory[iss.id] || {})[role];
  return remembered || (iss.suggestions || []).find((x) => x.role === role) || null;
}

function editDistance(a, b) {
  // characters inserted, deleted or replaced to turn a into b, whitespace aside (as the server counts them)
  a = Array.from(a.replace(/\s+/g, ""));
  b = Array.from(b.replace(/\s+/g, ""));
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) {
      next[j] = Math.min(row[j] + 1, next[j - 1] + 1, row[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    row = next;
  }
  return row[b.length];
}

function howMade(d, role) {
  const text = d.corr[role] || "";
  if (d.emptied[role]) return { origin: "typed", typed: Array.from(text.replace(/\s+/g, "")).length };
  const typed = editDistance(d.start[role] || "", text);
  return { origin: d.from[role] === "suggestion" && typed === 0 ? "suggestion" : "edited", typed: typed };
}

function draft(i) {
  const id = issues[i].id;
  if (!drafts[id]) drafts[id] = draftFrom(saved[id]);
  return drafts[id];
}

function stateOf(i) {
  const id = issues[i].id;
  const d = drafts[id];
  if (d && d.dirty) return "draft";
  const j = saved[id];
  if (!j) return "todo";
  return j.wrong.length ? "bad" : "ok";
}

// ---------------------------------------------------------------- sides

function sideOf(iss, role) { return iss.sides.find((s) => s.role === role); }

function squeeze(text) { return text.replace(/\s+/g, ""); }

function relationInfo(iss) {
  return relations[iss.relation] || { roles: [], evidence: "Tokens behind the distance:" };
}

function roleInfo(iss, role) {
  const known = relationInfo(iss).roles.find((r) => r.role === role);
  if (known) return known;
  const k = iss.sides.findIndex((s) => s.role === role);
  return { role: role, label: role, sub: "", key: String.fromCharCode(97 + 16 + k) };  // q, r, ... for unknown roles
}

function sideKeys(iss) { return iss.sides.map((s) => roleInfo(iss, s.role).key.toUpperCase()).join(" or "); }

function listText(iss) {
  // the text that tells issues apart in the list: the last side's source (the RTI, the mutant)
  return iss.sides[iss.sides.length - 1].source;
}

function sourceMark(iss, k) {
  // what to mark in side k's source: the replaced word, or a later side's source found inside it (the RTI)
  if (Array.isArray(iss.replaced) && iss.replaced[k]) return iss.replaced[k];
  const inner = iss.sides.slice(k + 1).find((s) => iss.sides[k].source.includes(s.source));
  return inner ? inner.source : null;
}

function buildSides(iss) {
  // one section per side, its elements named by role (pair-ROLE, wrong-ROLE, corr-ROLE, ...)
  const box = $("sides");
  box.replaceChildren();
  const keys = $("side-keys");
  keys.replaceChildren();
  iss.sides.forEach((side) => {
    const r = roleInfo(iss, side.role);
    const sec = el("section", "pair");
    sec.id = "pair-" + r.role;
    const head = el("div", "pair-head");
    const h = el("h2", "", r.label + " ");
    h.append(el("span", "sub", r.sub));
    const toggle = el("button", "toggle", "Wrong ");
    toggle.type = "button";
    toggle.id = "wrong-" + r.role;
    toggle.setAttribute("aria-pressed", "false");
    toggle.append(el("kbd", "", r.key.toUpperCase()));
    toggle.addEventListener("click", () => toggleWrong(r.role));
    head.append(h, toggle);
    const texts = el("div", "texts");
    const src = el("p", "source");
    src.id = r.role + "-source";
    const tr = el("p", "translation zh");
    tr.id = r.role + "-translation";
    tr.lang = "zh";
    const sugTag = el("span", "tag", "Suggested");
    sugTag.id = r.role + "-suggestion-tag";
    const sug = el("p", "suggestion zh");
    sug.id = r.role + "-suggestion";
    sug.lang = "zh";
    texts.append(el("span", "tag", "English"), src, el("span", "tag", "Model"), tr, sugTag, sug);
    const fix = el("div", "fix");
    fix.id = "fix-" + r.role;
    fix.hidden = true;
    const label = el("label", "", "Corrected translation of the " + r.label);
    label.htmlFor = "corr-" + r.role;
    const ta = el("textarea", "zh");
    ta.id = "corr-" + r.role;
    ta.lang = "zh";
    ta.rows = 1;
    ta.spellcheck = false;
    ta.addEventListener("input", (ev) => {
      const d = draft(current);
      d.corr[r.role] = ev.target.value;
      if (!ev.target.value.trim()) d.emptied[r.role] = true;
      d.dirty = true;
      const [txt, cls] = statusText(current);
      $("status").textContent = txt;
      $("status").className = "status " + cls;
      renderRow(current);
    });
    ta.addEventListener("change", () => projectDraft(current));
    const hint = el("div", "hint");
    hint.id = "hint-" + r.role;
    fix.append(label, ta, hint);
    sec.append(head, texts, fix);
    box.append(sec);
    const k = el("span");
    k.append(el("kbd", "", r.key.toUpperCase()), " " + r.label + " wrong");
    keys.append(k, " ");
  });
  shownRelation = iss.relation;
}

// ---------------------------------------------------------------- rendering

function highlightSpan(text, needle, cls) {
  const frag = document.createDocumentFragment();
  let at = needle ? text.indexOf(needle) : -1;
  if (at < 0 && needle) at = text.toLowerCase().indexOf(needle.toLowerCase());
  if (at < 0) { frag.append(document.createTextNode(text)); return frag; }
  frag.append(document.createTextNode(text.slice(0, at)));
  frag.append(el("mark", cls, text.slice(at, at + needle.length)));
  frag.append(document.createTextNode(text.slice(at + needle.length)));
  return frag;
}

function highlightTokens(text, tokens, cls) {
  // Mark one occurrence per missing token (tokens come with multiplicity), leftmost first.
  const taken = [];
  for (const t of tokens || []) {
    if (!t) continue;
    let from = 0;
    while (from <= text.length) {
      const at = text.indexOf(t, from);
      if (at < 0) break;
      const end = at + t.length;
      if (!taken.some(([a, b]) => at < b && a < end)) { taken.push([at, end]); break; }
      from = at + 1;
    }
  }
  taken.sort((x, y) => x[0] - y[0]);
  const frag = document.createDocumentFragment();
  let pos = 0;
  for (const [a, b] of taken) {
    frag.append(document.createTextNode(text.slice(pos, a)));
    frag.append(el("mark", cls, text.slice(a, b)));
    pos = b;
  }
  frag.append(document.createTextNode(text.slice(pos)));
  return frag;
}

function diffMarks(base, text) {
  // `text` with the characters that are not in `base` (outside their longest common subsequence) marked
  const a = Array.from(base), b = Array.from(text);
  const L = Array.from({ length: a.length + 1 }, () => new Array(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      L[i][j] = a[i] === b[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
    }
  }
  const frag = document.createDocumentFragment();
  let i = 0, j = 0, plain = "", added = "";
  const flush = () => {
    if (plain) { frag.append(document.createTextNode(plain)); plain = ""; }
    if (added) { frag.append(el("ins", "", added)); added = ""; }
  };
  while (j < b.length) {
    if (i < a.length && a[i] === b[j]) {
      if (added) flush();
      plain += b[j]; i++; j++;
    } else if (i < a.length && L[i + 1][j] >= L[i][j + 1]) {
      i++;
    } else {
      if (plain) { frag.append(document.createTextNode(plain)); plain = ""; }
      added += b[j]; j++;
    }
  }
  flush();
  return frag;
}

function renderSuggestion(iss, side) {
  const box = $(side.role + "-suggestion");
  const best = suggestionFor(iss, side.role);
  box.hidden = $(side.role + "-suggestion-tag").hidden = !best;
  box.replaceChildren();
  if (!best) return;
  const use = el("button", "use", "Use ");
  use.type = "button";
  use.append(el("kbd", "", "A"));
  use.addEventListener("click", () => useSuggestion(side.role));
  box.append(diffMarks(side.translation, best.text), use,
    el("span", "suggestion-origin", best.origin + " · score " + Number(best.score).toFixed(2)));
}

function renderProgress() {
  const s = stats;
  const box = $("progress-text");
  box.replaceChildren();
  const prec = s.precision === null ? "–" : s.precision.toFixed(2);
  box.append("Judged ", el("b", "", String(s.judged)), " of " + s.total + " · ",
    el("b", "", String(s.with_error)), " with an error · precision ", el("b", "", prec));
  $("meter-fill").style.width = (s.total ? (100 * s.judged) / s.total : 0) + "%";
}

function buildList() {
  // every issue's row, once; afterwards only the rows whose issue changes are drawn again (renderRow)
  const list = $("list");
  const rows = document.createDocumentFragment();
  issues.forEach((iss, i) => {
    const row = el("div", "item");
    row.dataset.index = String(i);
    row.append(el("span", "num", String(i + 1)), el("span", "dot " + stateOf(i)), el("span", "txt", listText(iss)));
    rows.append(row);
  });
  list.replaceChildren(rows);
  list.addEventListener("click", (e) => {
    const row = e.target.closest(".item");
    if (row) go(Number(row.dataset.index));
  });
}

function renderRow(i) {
  const row = $("list").children[i];
  if (!row) return;
  row.classList.toggle("current", i === current);
  row.children[1].className = "dot " + stateOf(i);
}

function renderList() {
  // the row marked current before and the current one: a key press changes no other
  const was = marked;
  marked = current;
  if (was !== current) renderRow(was);
  renderRow(current);
  const cur = $("list").children[current];
  if (cur) cur.scrollIntoView({ block: "nearest" });
}

function statusText(i) {
  const st = stateOf(i);
  if (st === "draft") return ["Unsaved changes", "draft"];
  if (st === "todo") return ["Not judged", ""];
  const j = saved[issues[i].id];
  if (st === "ok") return ["Saved · no error", "ok"];
  const which = j.wrong.map((s) => roleInfo(issues[i], s).label).join(" and ");
  return ["Saved · " + which + " wrong · " + j.kind, "bad"];
}

function render() {
  const iss = issues[current];
  const d = draft(current);
  $("position").textContent = "Issue " + (current + 1) + " of " + issues.length;
  $("meta").textContent = iss.relation + " · distance " + iss.distance + " · id " + iss.id;
  const [txt, cls] = statusText(current);
  $("status").textContent = txt;
  $("status").className = "status " + cls;

  if (shownRelation !== iss.relation) buildSides(iss);
  iss.sides.forEach((side, k) => {
    $(side.role + "-source").replaceChildren(highlightSpan(side.source, sourceMark(iss, k), "rti"));
    $(side.role + "-translation").replaceChildren(highlightTokens(side.translation, iss.evidence, "miss"));
    renderSuggestion(iss, side);
  });
  const miss = $("missing");
  miss.replaceChildren();
  if (iss.evidence && iss.evidence.length) {
    miss.append(relationInfo(iss).evidence);
    iss.evidence.forEach((t) => miss.append(el("span", "chip", t)));
  }

  for (const s of iss.sides.map((x) => x.role)) {
    const on = d.wrong.has(s);
    $("wrong-" + s).setAttribute("aria-pressed", String(on));
    $("pair-" + s).classList.toggle("is-wrong", on);
    $("fix-" + s).hidden = !on;
    const ta = $("corr-" + s);
    if (ta.value !== (d.corr[s] || "")) ta.value = d.corr[s] || "";
    const hint = $("hint-" + s);
    const source = sideOf(iss, s).source;
    const own = saved[iss.id] && saved[iss.id].corrections[s];
    const proj = projected[source];
    hint.textContent = !own && prefill[source] && d.corr[s] === prefill[source]
      ? "Prefilled with your correction of the same text in another issue."
      : !own && proj && d.corr[s] === proj.text
        ? "Prefilled with the part of your correction of its sentence that its words align to (confidence "
          + proj.confidence.toFixed(2) + ")." : "";
  }
  $("no-error").setAttribute("aria-pressed", String(d.noError));
  const kindBox = $("kinds");
  kindBox.classList.toggle("off", d.wrong.size === 0);
  Array.from(kindBox.children).forEach((b) => b.setAttribute("aria-pressed", String(b.dataset.kind === d.kind)));
  renderList();
}

function say(text, cls) {
  const m = $("message");
  m.textContent = text;
  m.className = "message " + (cls || "");
}

// ---------------------------------------------------------------- actions

function go(i) {
  if (i < 0 || i >= issues.length) return;
  current = i;
  say("");
  render();
}

function toggleWrong(side) {
  const d = draft(current);
  const iss = issues[current];
  if (d.wrong.has(side)) d.wrong.delete(side);
  else {
    d.wrong.add(side);
    d.noError = false;
    const s = sideOf(iss, side);
    if (!d.corr[side]) {
      d.corr[side] = prefill[s.source] || (projected[s.source] || {}).text || s.translation;
      d.start[side] = d.corr[side];
      d.from[side] = "prefill";
      d.emptied[side] = false;
    }
  }
  d.dirty = true;
  render();
  projectDraft(current);
}

// The issue's side whose source is the sentence its other sides were cut from (null: none).
function sentenceRole(iss) {
  const s = iss.sentence ? iss.sides.find((x) => x.source === iss.sentence) : null;
  return s ? s.role : null;
}

// As soon as the issue's sentence is corrected (not yet saved), each of its phrase sides marked wrong and still
// as it opened takes the stretch of that correction its words align to: a sentence is corrected once.
async function projectDraft(index) {
  const iss = issues[index];
  const d = draft(index);
  const sr = sentenceRole(iss);
  if (!sr || !d.wrong.has(sr)) return;
  const text = (d.corr[sr] || "").trim();
  if (!text || squeeze(text) === squeeze(sideOf(iss, sr).translation)) return;
  const open = (s) => s.role !== sr && d.wrong.has(s.role) && d.from[s.role] === "prefill"
    && d.corr[s.role] === d.start[s.role] && !prefill[s.source];
  if (!iss.sides.some(open)) return;
  let res;
  try {
    res = await (await api("/api/project", { sentence: iss.sentence, correction: text })).json();
  } catch (e) {
    say("The phrase could not be pre-filled from the sentence's correction (" + e.message + "); edit it (E).", "error");
    return;
  }
  for (const s of iss.sides.filter(open)) {  // not the ones typed in while the projection was made
    const p = res.projected[s.source];
    if (!p || !p.text) continue;
    projected[s.source] = p;
    d.corr[s.role] = p.text;
    d.start[s.role] = p.text;
  }
  if (index === current) render();
}

function useSuggestion(role) {
  // the best suggestion into the edit box: of `role`, else of the first side marked wrong that has one, else
  // the issue's best suggestion (its side is marked wrong)
  const iss = issues[current];
  const d = draft(current);
  if (!role) {
    const marked = iss.sides.map((s) => s.role).find((r) => d.wrong.has(r) && suggestionFor(iss, r));
    role = marked || Object.keys(memory[iss.id] || {})[0] || ((iss.suggestions || [])[0] || {}).role;
  }
  const best = role ? suggestionFor(iss, role) : null;
  if (!best) { say("No suggestion for this issue; mark the wrong side (" + sideKeys(iss) + ") and edit (E).", "error"); return; }
  d.wrong.add(role);
  d.noError = false;
  d.corr[role] = best.text;
  d.start[role] = best.text;
  d.from[role] = "suggestion";
  d.emptied[role] = false;
  d.dirty = true;
  render();
  say("The suggestion is in the " + roleInfo(iss, role).label + " edit box: pick the kind (1–5) and save, or edit it (E).", "saved");
}

function markNoError() {
  const d = draft(current);
  d.wrong.clear();
  d.noError = !d.noError;
  d.kind = d.noError ? null : d.kind;
  d.dirty = true;
  render();
}

function pickKind(n) {
  const d = draft(current);
  if (d.wrong.size === 0) { say("Mark a translation wrong first (" + sideKeys(issues[current]) + "), then pick its kind.", "error"); return; }
  d.kind = kinds[n];
  d.dirty = true;
  render();
}

function edit() {
  const d = draft(current);
  const side = issues[current].sides.map((s) => s.role).find((s) => d.wrong.has(s));
  if (!side) { say("Mark a translation wrong first (" + sideKeys(issues[current]) + "); then E edits its correction.", "error"); return; }
  const ta = $("corr-" + side);
  ta.focus();
  ta.setSelectionRange(ta.value.length, ta.value.length);
}

async function save(andNext) {
  const at = current;
  const iss = issues[at];
  const d = draft(current);
  if (!d.noError && d.wrong.size === 0) {
    say("Mark " + iss.sides.map((s) => { const r = roleInfo(iss, s.role); return r.key.toUpperCase() + " (" + r.label + " wrong)"; }).join(", ") +
      " or N (no error) first.", "error");
    return;
  }
  if (d.wrong.size && !d.kind) { say("Pick the kind of error: keys 1 to 5.", "error"); return; }
  for (const s of d.wrong) {
    if (!squeeze(d.corr[s])) { say("Write the corrected translation (E).", "error"); return; }
    if (squeeze(d.corr[s]) === squeeze(sideOf(iss, s).translation)) {
      say("The corrected " + roleInfo(iss, s).label + " translation is still the model's; edit it (E).", "error");
      return;
    }
  }
  const body = { issue: iss.id, wrong: iss.sides.map((s) => s.role).filter((s) => d.wrong.has(s)), kind: d.wrong.size ? d.kind : null, corrections: {} };
  body.wrong.forEach((s) => { body.corrections[s] = d.corr[s]; });
  body.how = {};
  body.wrong.forEach((s) => { body.how[s] = howMade(d, s); });
  try {
    const res = await (await api("/api/judge", body)).json();
    saved[iss.id] = res.judgment;
    stats = res.stats;
    // the pre-fills this save changed (its sources'; null: withdrawn)
    Object.entries(res.prefill).forEach(([source, text]) => {
      if (text === null) delete prefill[source];
      else prefill[source] = text;
    });
    memory = res.memory || {};
    projected = res.projected || {};
    drafts[iss.id] = draftFrom(res.judgment);
  } catch (e) {
    say("Not saved: " + e.message, "error");
    return;
  }
  renderRow(at);  // the saved issue's row, wherever the page has gone since
  renderProgress();
  if (document.activeElement && document.activeElement.tagName === "TEXTAREA") document.activeElement.blur();
  if (andNext && current < issues.length - 1) { go(current + 1); say("Saved issue " + (at + 1) + ".", "saved"); }
  else { render(); say("Saved.", "saved"); }
}

function nextTodo() {
  for (let k = 1; k <= issues.length; k++) {
    const i = (current + k) % issues.length;
    if (!saved[issues[i].id]) { go(i); return; }
  }
  say("Every issue is judged. Shift F finishes the review.", "saved");
}

async function exportCsv() {
  try {
    const blob = await (await api("/api/export.csv")).blob();
    const a = el("a");
    a.href = URL.createObjectURL(blob);
    a.download = "review.csv";
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 1000);
    say("Exported review.csv.", "saved");
  } catch (e) {
    say("Export failed: " + e.message, "error");
  }
}

function askFinish() {
  const left = stats.total - stats.judged;
  const unsaved = Object.values(drafts).filter((d) => d.dirty).length;
  let text = "Judged " + stats.judged + " of " + stats.total + ".";
  if (left) text += " " + left + " issue(s) are not judged; they will not be corrected.";
  if (unsaved) text += " " + unsaved + " issue(s) have unsaved changes, which will be lost.";
  $("dialog-text").textContent = text;
  $("overlay").hidden = false;
  $("dialog-ok").focus();
}

function closeDialog() { $("overlay").hidden = true; }

async function finish() {
  closeDialog();
  try {
    const res = await (await api("/api/finish", {})).json();
    stats = res.stats;
  } catch (e) {
    say("Finish failed: " + e.message, "error");
    return;
  }
  finished = true;
  $("done-text").textContent = "Judged " + stats.judged + " of " + stats.total + ", " + stats.with_error +
    " with an error (precision " + (stats.precision === null ? "–" : stats.precision.toFixed(2)) + ").";
  $("done").hidden = false;
}

// ---------------------------------------------------------------- keys

function onKey(e) {
  if (finished) return;
  if (!$("overlay").hidden) {
    if (e.key === "Escape") { e.preventDefault(); closeDialog(); }
    else if (e.key === "Enter") { e.preventDefault(); finish(); }
    return;
  }
  const inText = e.target && e.target.tagName === "TEXTAREA";
  if (inText) {
    if (e.key === "Escape") { e.preventDefault(); e.target.blur(); }
    else if (e.key === "Enter" && (e.ctrlKey || e.metaKey) && !e.isComposing) { e.preventDefault(); save(true); }
    return;
  }
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  const k = e.key;
  const act = {
    j: () => go(current + 1), ArrowRight: () => go(current + 1), ArrowDown: () => go(current + 1),
    k: () => go(current - 1), ArrowLeft: () => go(current - 1), ArrowUp: () => go(current - 1),
    u: nextTodo, n: markNoError,
    e: edit, a: () => useSuggestion(null), Enter: () => save(true), s: () => save(false), x: exportCsv, F: askFinish,
  }[k];
  if (act) { e.preventDefault(); act(); return; }
  const role = issues.length ? issues[current].sides.map((s) => roleInfo(issues[current], s.role)).find((r) => r.key === k) : null;
  if (role) { e.preventDefault(); toggleWrong(role.role); return; }
  if (/^[1-5]$/.test(k)) { e.preventDefault(); pickKind(Number(k) - 1); }
}

// ---------------------------------------------------------------- start

async function start() {
  let st;
  try {
    st = await (await api("/api/state")).json();
  } catch (e) {
    $("progress-text").textContent = TOKEN ? "Could not load the review: " + e.message
      : "Open the full address the review command printed (it ends with #token=…): it carries this session's key.";
    return;
  }
  issues = st.issues;
  kinds = st.kinds;
  relations = st.relations || {};
  saved = st.judgments;
  prefill = st.prefill;
  memory = st.memory || {};
  projected = st.projected || {};
  stats = st.stats;
  const box = $("kinds");
  kinds.forEach((name, n) => {
    const b = el("button", "", name);
    b.type = "button";
    b.dataset.kind = name;
    b.append(el("kbd", "", String(n + 1)));
    b.addEventListener("click", () => pickKind(n));
    box.append(b);
  });
  $("no-error").addEventListener("click", markNoError);
  $("prev").addEventListener("click", () => go(current - 1));
  $("next").addEventListener("click", () => go(current + 1));
  $("save").addEventListener("click", () => save(true));
  $("export").addEventListener("click", exportCsv);
  $("finish").addEventListener("click", askFinish);
  $("dialog-cancel").addEventListener("click", closeDialog);
  $("dialog-ok").addEventListener("click", finish);
  document.addEventListener("keydown", onKey);
  window.addEventListener("beforeunload", (e) => {
    if (!finished && Object.values(drafts).some((d) => d.dirty)) { e.preventDefault(); e.returnValue = ""; }
  });
  renderProgress();
  buildList();
  if (!issues.length) { say("There is nothing to review."); return; }
  const first = issues.findIndex((iss) => !saved[iss.id]);
  go(first < 0 ? 0 : first);
  if (st.finished) say("This review was finished; changes are still saved.", "saved");
}

start();
