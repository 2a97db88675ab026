// rtfshost playground: a processor run over typed chunks on the server
// (POST /ui/api/playground). The whole input lives in the URL's fragment,
// "#v1:" followed by the base64url of the JSON
// {"program":..,"processor":..,"state":..,"chunks":..,"recording":..}, so a link can be
// shared; opening one runs it.
"use strict";
(() => {
  const API = "/ui/api/";
  const $ = (id) => document.getElementById(id);
  const token = () => sessionStorage.getItem("rtfshost.token") || "";
  function headers(extra) {
    const h = Object.assign({}, extra || {});
    if (token()) h["Authorization"] = "Bearer " + token();
    return h;
  }
  let csrf = "";
  let result = null;
  let shown = 0;

  const enc = (s) => btoa(String.fromCharCode(...new TextEncoder().encode(s)))
    .replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  const dec = (s) => new TextDecoder().decode(Uint8Array.from(
    atob(s.replace(/-/g, "+").replace(/_/g, "/")), (c) => c.charCodeAt(0)));

  function input() {
    return { program: $("pg-program").value, processor: $("pg-processor").value.trim(),
      state: $("pg-state").value.trim(), chunks: $("pg-chunks").value, recording: $("pg-recording").value };
  }
  function toFragment() {
    history.replaceState(null, "", "#v1:" + enc(JSON.stringify(input())));
  }
  function fromFragment() {
    const f = location.hash;
    if (!f.startsWith("#v1:")) return false;
    try {
      const v = JSON.parse(dec(f.slice(4)));
      $("pg-program").value = v.program || "";
      $("pg-processor").value = v.processor || "";
      $("pg-state").value = v.state || "";
      $("pg-chunks").value = v.chunks || "";
      if (v.recording) addRecording(v.recording).selected = true;
      return true;
    } catch (e) {
      showError("the link's fragment is not a playground input: " + e.message);
      return false;
    }
  }

  function addRecording(name) {
    const sel = $("pg-recording");
    for (const o of sel.options) if (o.value === name) return o;
    const o = document.createElement("option");
    o.value = name; o.textContent = name;
    sel.appendChild(o);
    return o;
  }
  async function listRecordings() {
    try {
      const res = await fetch(API + "recordings", { headers: headers(), cache: "no-store" });
      if (res.ok) (await res.json()).recordings.forEach(addRecording);
    } catch (e) { /* the list is a convenience */ }
  }

  async function session() {
    const res = await fetch(API + "session", { headers: headers(), cache: "no-store" });
    if (res.status === 401) { $("pg-token").hidden = false; throw new Error("a bearer token is needed"); }
    if (!res.ok) throw new Error("session: HTTP " + res.status);
    csrf = (await res.json()).csrf;
  }

  function showError(msg, line, col) {
    const box = $("pg-error");
    box.hidden = false;
    box.textContent = line ? `${line}:${col}: ${msg}` : msg;
    const src = $("pg-source");
    src.hidden = !line;
    if (!line) return;
    src.textContent = "";
    const lines = $("pg-program").value.split("\n");
    lines.forEach((text, i) => {
      const div = document.createElement("div");
      div.textContent = String(i + 1).padStart(4) + " | " + text;
      if (i + 1 === line) { div.className = "pg-hl"; div.id = "pg-hl"; }
      src.appendChild(div);
    });
  }

  function cell(tr, text, cls) {
    const td = document.createElement("td");
    td.textContent = text === undefined || text === null ? "" : text;
    if (cls) td.className = cls;
    tr.appendChild(td);
  }
  const js = (v) => v === undefined ? "" : JSON.stringify(v);

  function render() {
    const body = $("pg-rows");
    body.textContent = "";
    if (!result) return;
    result.steps.slice(0, shown).forEach((s) => {
      const tr = document.createElement("tr");
      tr.className = "pg-step";
      cell(tr, s.seq, "mono");
      cell(tr, js(s.chunk), "mono c-chunk");
      cell(tr, js(s.stateBefore), "mono c-before");
      cell(tr, js(s.state), "mono c-state");
      cell(tr, s.action || "", "mono c-action");
      cell(tr, s.error ? "error: " + s.error : js(s.output), "mono c-output");
      body.appendChild(tr);
      if (s.error) showError(s.error, s.line, s.col);
    });
    const done = shown >= result.steps.length;
    $("pg-end").textContent = done && result.status
      ? `status ${result.status}` + (result.reason ? ` (${result.reason})` : "") + (result.result !== undefined ? " result " + js(result.result) : "")
      : `${shown} of ${result.steps.length} steps`;
  }

  async function run(step) {
    $("pg-error").hidden = true; $("pg-source").hidden = true;
    toFragment();
    if (step && result && shown < result.steps.length) { shown++; render(); return; }
    $("pg-status").textContent = "running…";
    try {
      if (!csrf) await session();
      const res = await fetch(API + "playground", { method: "POST", cache: "no-store",
        headers: headers({ "X-CSRF-Token": csrf, "Content-Type": "application/json" }), body: JSON.stringify(input()) });
      const r = await res.json();
      if (!res.ok && !r.steps) throw new Error(r.error || "HTTP " + res.status);
      result = r;
      shown = step ? Math.min(1, r.steps.length) : r.steps.length;
      render();
      if (r.error) showError(r.error, r.line, r.col);
      $("pg-status").textContent = "";
    } catch (e) {
      $("pg-status").textContent = "";
      showError(e.message);
    }
  }

  $("pg-run").addEventListener("click", () => run(false));
  $("pg-step").addEventListener("click", () => run(true));
  ["pg-program", "pg-processor", "pg-state", "pg-chunks", "pg-recording"].forEach((id) =>
    $(id).addEventListener("input", () => { result = null; shown = 0; }));
  $("pg-token-save").addEventListener("click", () => {
    sessionStorage.setItem("rtfshost.token", $("pg-token-input").value.trim());
    $("pg-token").hidden = true; csrf = ""; run(false);
  });
  listRecordings();
  if (fromFragment()) run(false);
})();
