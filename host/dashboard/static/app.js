// rtfshost dashboard. No framework, no external asset. Data arrives over one
// Server-Sent Events response (read with fetch, so that it can carry the
// bearer token); the page never polls. Only the rows of the current page are
// in the DOM, so a thousand streams cost a hundred rows.
"use strict";
(() => {
  const API = "/ui/api/";
  const PAGE = 100;
  const STATES = ["active", "paused", "failed", "completed", "cancelled", "error", "unrecoverable"];
  const $ = (id) => document.getElementById(id);

  const model = {
    rows: new Map(),   // id -> row (with .rates)
    order: [],         // ids in start order
    skew: 0,           // server clock - local clock, ms
    interval: 1000,
    loaded: false,     // the first snapshot has arrived
  };
  const ui = { state: "", text: "", page: 0, watch: "", trs: new Map(), dirty: true, shownIds: "" };
  let csrf = "";
  let conn = null;     // AbortController of the events response
  let retry = 0;

  // ---- token and requests -------------------------------------------------
  const token = () => sessionStorage.getItem("rtfshost.token") || "";
  function headers(extra) {
    const h = Object.assign({}, extra || {});
    if (token()) h["Authorization"] = "Bearer " + token();
    return h;
  }
  function askToken(refused) {
    const dlg = $("token-dialog");
    $("token-error").hidden = !refused;
    if (!dlg.open) dlg.showModal();
    $("token-input").focus();
  }
  $("token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    sessionStorage.setItem("rtfshost.token", $("token-input").value.trim());
    $("token-dialog").close();
    start();
  });

  async function session() {
    const res = await fetch(API + "session", { headers: headers(), cache: "no-store" });
    if (res.status === 401) { askToken(token() !== ""); return false; }
    if (!res.ok) throw new Error("session: HTTP " + res.status);
    const s = await res.json();
    csrf = s.csrf;
    $("version").textContent = s.version || "";
    return true;
  }

  async function start() {
    try {
      if (!(await session())) return;
    } catch (e) { setConn("down", "offline"); setTimeout(start, 2000); return; }
    connect();
  }

  // ---- the event stream -----------------------------------------------------
  function connect() {
    if (conn) conn.abort();
    conn = new AbortController();
    const ac = conn;
    const url = API + "events" + (ui.watch ? "?stream=" + encodeURIComponent(ui.watch) : "");
    setConn("", "connecting…");
    fetch(url, { headers: headers({ Accept: "text/event-stream" }), signal: ac.signal, cache: "no-store" })
      .then(async (res) => {
        if (res.status === 401) { askToken(true); return; }
        if (!res.ok || !res.body) throw new Error("HTTP " + res.status);
        retry = 0;
        setConn("live", "live");
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          let i;
          while ((i = buf.indexOf("\n\n")) >= 0) {
            const block = buf.slice(0, i);
            buf = buf.slice(i + 2);
            dispatch(block);
          }
        }
        throw new Error("closed");
      })
      .catch(() => {
        if (ac.signal.aborted) return;
        setConn("down", "reconnecting…");
        retry = Math.min(retry + 1, 6);
        setTimeout(() => { if (conn === ac) start(); }, 250 * 2 ** retry);
      });
  }

  function dispatch(block) {
    let name = "message", data = "";
    for (const line of block.split("\n")) {
      if (line.startsWith("event: ")) name = line.slice(7);
      else if (line.startsWith("data: ")) data += line.slice(6);
    }
    if (!data) return;
    const msg = JSON.parse(data);
    switch (name) {
      case "snapshot": model.rows.clear(); model.order = []; model.loaded = true; applyRows(msg); break;
      case "rows": applyRows(msg); break;
      case "detail": renderDetail(msg); break;
      case "detail-gone": detailGone(msg); break;
      case "output": addOutput(msg); break;
      case "dropped": addDropped(msg); break;
      case "cut": if (msg.stream === ui.watch) notice(msg.message); break;
      case "timeline": renderTimeline(msg); break;
    }
  }

  function applyRows(msg) {
    model.skew = msg.now - Date.now();
    model.interval = msg.interval || 1000;
    renderBreakers(msg.breakers || []);
    for (const r of msg.rows || []) {
      const old = model.rows.get(r.id);
      if (!old) model.order.push(r.id);
      if (!r.rates) {
        r.rates = old ? old.rates : [];
        if (!r.lifetime) r.rates.push(r.rate); // an ended stream's average is no sample
        if (r.rates.length > 180) r.rates.shift();
      }
      model.rows.set(r.id, r);
    }
    for (const id of msg.gone || []) model.rows.delete(id);
    if ((msg.gone || []).length) model.order = model.order.filter((id) => model.rows.has(id));
    // Streams not in the delta still age and their rate is steady: their
    // sparkline moves on with their last rate. An ended stream's stops.
    const changed = new Set((msg.rows || []).map((r) => r.id));
    for (const [id, r] of model.rows) {
      if (!changed.has(id) && r.rates && !r.lifetime) {
        r.rates.push(r.rate);
        if (r.rates.length > 180) r.rates.shift();
      }
    }
    schedule();
    if (ui.watch) renderDetailSpark();
  }

  function setConn(cls, text) {
    $("conn").className = "conn " + cls;
    $("conn-text").textContent = text;
  }

  // ---- the list -------------------------------------------------------------
  let frame = 0;
  function schedule() {
    if (!frame) frame = requestAnimationFrame(() => { frame = 0; render(); });
  }

  function matches(r) {
    if (ui.state && r.state !== ui.state) return false;
    if (!ui.text) return true;
    const t = ui.text;
    return r.id.toLowerCase().includes(t) || r.endpoint.toLowerCase().includes(t) || r.processor.toLowerCase().includes(t);
  }

  function render() {
    renderChips();
    if (ui.watch) return;
    const ids = model.order.filter((id) => matches(model.rows.get(id)));
    const pages = Math.max(1, Math.ceil(ids.length / PAGE));
    ui.page = Math.min(ui.page, pages - 1);
    const shown = ids.slice(ui.page * PAGE, ui.page * PAGE + PAGE);
    $("page-info").textContent = ids.length ? `${ui.page * PAGE + 1}–${ui.page * PAGE + shown.length} of ${ids.length}` : "0";
    $("prev").disabled = ui.page === 0;
    $("next").disabled = ui.page >= pages - 1;
    $("loading").hidden = model.loaded;
    $("empty").hidden = !model.loaded || model.rows.size > 0;
    const tbody = $("rows");
    const key = shown.join("\u0000");
    const now = Date.now() + model.skew;
    for (const id of shown) updateRow(id, model.rows.get(id), now);
    if (key !== ui.shownIds) {
      // Reorder only when the set of rows shown changed: focus stays put.
      const keep = new Set(shown);
      for (const [id, tr] of ui.trs) if (!keep.has(id)) { tr.remove(); ui.trs.delete(id); }
      shown.forEach((id, i) => {
        const tr = ui.trs.get(id);
        if (tbody.children[i] !== tr) tbody.insertBefore(tr, tbody.children[i] || null);
      });
      ui.shownIds = key;
    }
  }

  function renderChips() {
    const counts = { "": model.rows.size };
    for (const s of STATES) counts[s] = 0;
    for (const r of model.rows.values()) counts[r.state] = (counts[r.state] || 0) + 1;
    const nav = $("chips");
    if (!nav.children.length) {
      for (const s of ["", ...STATES]) {
        const b = document.createElement("button");
        b.type = "button"; b.className = "chip"; b.dataset.state = s;
        b.addEventListener("click", () => setStateFilter(s));
        nav.appendChild(b);
      }
    }
    for (const b of nav.children) {
      const s = b.dataset.state;
      b.setAttribute("aria-pressed", String(ui.state === s));
      b.innerHTML = "";
      b.append(s ? s[0].toUpperCase() + s.slice(1) : "All");
      const n = document.createElement("b"); n.textContent = counts[s] || 0; b.append(n);
    }
  }

  function setStateFilter(s) {
    ui.state = s; ui.page = 0;
    $("state-filter").value = s;
    if (ui.watch) location.hash = "#/";
    schedule();
  }

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function updateRow(id, r, now) {
    let tr = ui.trs.get(id);
    if (!tr) {
      tr = el("tr");
      tr.dataset.id = id;
      const c0 = el("td"); const a = el("a", "sid"); a.href = "#/streams/" + encodeURIComponent(id); a.textContent = id;
      c0.append(a, el("span", "sub")); tr.append(c0);
      const c1 = el("td"); const pg = el("div", "progress"); const pb = el("div", "bar"); pb.append(el("i")); pg.append(pb, el("span", "pv"));
      c1.append(el("span", "badge"), pg); tr.append(c1);
      tr.append(el("td", "num c-rate"));
      const ct = el("td", "c-trend"); ct.insertAdjacentHTML("afterbegin", '<svg class="spark" width="80" height="20" viewBox="0 0 80 20" aria-hidden="true"><polygon class="area"/><polyline/></svg>'); tr.append(ct);
      tr.append(el("td", "num c-processed"));
      const c4 = el("td"); const q = el("div", "queue"); const bar = el("div", "bar"); bar.append(el("i")); q.append(bar, el("span", "qv")); c4.append(q); tr.append(c4);
      tr.append(el("td", "num c-reconnects"));
      tr.append(el("td", "out c-output"));
      tr.append(el("td", "num c-age"));
      tr.append(el("td", "c-reason"));
      tr.addEventListener("dblclick", () => { location.hash = "#/streams/" + encodeURIComponent(id); });
      ui.trs.set(id, tr);
    }
    const c = tr.children;
    setText(c[0].children[1], `${r.processor} · ${r.endpoint}`);
    c[0].children[1].title = `${r.transport} · ${r.endpoint}`;
    const badge = c[1].firstChild;
    setText(badge, r.state); badge.className = "badge st-" + r.state;
    if (r.message) badge.title = r.message; else badge.removeAttribute("title");
    // An ended stream has nothing left to estimate: no ETA.
    const ended = !(r.state === "active" || r.state === "paused");
    setProgress(c[1].querySelector(".progress"), r.progress, ended ? null : r.etaMs, r.step);
    setText(c[2], fmtRate(r.rate) + (r.lifetime ? " avg" : ""));
    c[2].title = r.lifetime ? "average over the stream's life" : "over the last " + model.interval / 1000 + " s";
    c[3].title = "chunks per second, the last " + Math.round(90 * model.interval / 1000) + " s";
    drawSpark(c[3].querySelector("svg"), r.rates, 80, 20);
    setText(c[4], fmtInt(r.processed));
    const live = r.state === "active" || r.state === "paused" || r.state === "failed";
    const fill = live && r.capacity ? r.queued / r.capacity : 0;
    const bar = c[5].querySelector(".bar");
    bar.firstChild.style.width = (fill * 100).toFixed(0) + "%";
    bar.className = "bar" + (fill >= 1 ? " full" : fill >= 0.75 ? " warn" : "");
    setText(c[5].querySelector(".qv"), live ? `${r.queued}/${r.capacity}` : "–");
    c[5].title = live ? `${r.queued} queued of ${r.capacity}` : "ended";
    setText(c[6], fmtInt(r.reconnects));
    // A failed stream shows why in place of its last output.
    const failed = (r.state === "error" || r.state === "failed") && r.message;
    setText(c[7], failed ? r.message : r.lastOutput || "");
    c[7].title = failed ? r.message : r.lastOutput || "";
    c[7].className = "out c-output" + (failed ? " err" : "");
    setText(c[8], fmtAge((r.endedMs || now) - r.startedMs));
    c[8].title = r.endedMs ? "ended " + new Date(r.endedMs).toLocaleString() : "";
    // An unrecoverable stream says why where an ended one says how it ended.
    setText(c[9], r.reason || (r.state === "unrecoverable" ? r.message : ""));
    c[9].title = r.message || "";
  }

  // setProgress draws a stream's progress: a bar, the percentage and the
  // time left; hidden when the stream reports none.
  function setProgress(box, fraction, etaMs, step, showStep) {
    const known = fraction !== undefined && fraction !== null;
    box.hidden = !known && !step;
    if (box.hidden) return;
    box.querySelector(".bar").hidden = !known;
    if (known) box.querySelector(".bar").firstChild.style.width = (fraction * 100).toFixed(0) + "%";
    const parts = [];
    if (known) parts.push((fraction * 100).toFixed(0) + "%");
    if (etaMs !== undefined && etaMs !== null) parts.push("eta " + fmtDuration(etaMs));
    if (showStep && step) parts.push(step);
    setText(box.querySelector(".pv"), parts.join(" · "));
    box.title = step || "";
  }
  function fmtDuration(ms) {
    const s = Math.round(ms / 1000);
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s";
    return Math.floor(s / 3600) + "h" + String(Math.floor(s / 60) % 60).padStart(2, "0") + "m";
  }
  // renderBreakers shows the origins whose circuit is open: starts and
  // reconnects to them fail at once until the time shown.
  function renderBreakers(list) {
    const box = $("breakers");
    const open = list.filter((b) => b.state !== "closed");
    box.hidden = open.length === 0;
    box.replaceChildren(...open.map((b) => el("div", "", `circuit ${b.state} for ${b.origin} until ${new Date(b["open-until-epoch-ms"]).toLocaleTimeString()} (${b.failures} failures; last: ${b["last-error"]})`)));
  }

  function setText(e, t) { if (e.textContent !== String(t)) e.textContent = t; }
  function fmtInt(n) { return Number(n).toLocaleString("en-US"); }
  function fmtRate(v) { return v >= 100 ? `${Math.round(v).toLocaleString("en-US")}/s` : `${v.toFixed(1)}/s`; }
  function fmtAge(ms) {
    const s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0");
    if (s < 86400) return Math.floor(s / 3600) + "h" + String(Math.floor(s / 60) % 60).padStart(2, "0");
    return Math.floor(s / 86400) + "d" + Math.floor(s / 3600) % 24 + "h";
  }
  function drawSpark(svg, rates, w, h) {
    const pts = (rates || []).slice(-90);
    const max = Math.max(1, ...pts);
    const step = pts.length > 1 ? w / (pts.length - 1) : w;
    const coords = pts.map((v, i) => `${(i * step).toFixed(1)},${(h - 1 - (v / max) * (h - 2)).toFixed(1)}`);
    const line = coords.join(" ");
    svg.querySelector("polyline").setAttribute("points", line);
    svg.querySelector("polygon").setAttribute("points", coords.length ? `0,${h} ${line} ${((pts.length - 1) * step).toFixed(1)},${h}` : "");
  }

  // ---- a stream's page ------------------------------------------------------
  let outputs = 0;
  function showList() {
    ui.watch = "";
    $("view-detail").hidden = true;
    $("view-list").hidden = false;
    document.title = "rtfshost streams";
    ui.shownIds = "";
    schedule();
  }
  function showDetail(id) {
    ui.watch = id;
    $("view-list").hidden = true;
    $("view-detail").hidden = false;
    $("detail-id").textContent = id;
    $("detail-state").textContent = "";
    $("detail-notice").hidden = true;
    $("outputs").innerHTML = "";
    $("outputs-count").textContent = "";
    $("state-tree").innerHTML = "";
    $("inspect-tree").innerHTML = "";
    $("detail-overview").innerHTML = "";
    $("detail-stats").innerHTML = "";
    $("timeline").innerHTML = "";
    $("timeline-count").textContent = "";
    outputs = 0;
    document.title = id + " · rtfshost";
    $("back").focus();
  }

  function kv(dl, pairs) {
    dl.innerHTML = "";
    for (const [k, v] of pairs) {
      dl.append(el("dt", "", k), el("dd", "", v === null || v === undefined || v === "" ? "–" : String(v)));
    }
  }

  function renderDetail(info) {
    if (info["stream-id"] !== ui.watch) return;
    const st = info.status || {};
    const badge = $("detail-state");
    badge.textContent = st.state; badge.className = "badge st-" + st.state;
    badge.dataset.state = st.state;
    const live = st.state === "active" || st.state === "paused" || st.state === "failed";
    const failure = info.failure;
    $("btn-pause").disabled = st.state !== "active";
    $("btn-resume").disabled = st.state !== "paused";
    $("btn-resume").hidden = st.state === "failed";
    $("btn-retry").hidden = $("btn-skip").hidden = st.state !== "failed";
    $("btn-retry").disabled = st.state !== "failed";
    $("btn-skip").disabled = st.state !== "failed" || !failure || failure.kind !== "processor";
    $("btn-cancel").disabled = !live;
    $("detail-failure").hidden = !failure;
    if (failure) {
      kv($("failure-kv"), [
        ["error", failure.error], ["chunk", failure.kind === "processor" ? "#" + failure.seq : "–"], ["kind", failure.kind],
        ["attempts", failure.attempts], ["at", new Date(failure["at-epoch-ms"]).toLocaleString()],
      ]);
    }
    const dead = info["dead-letters"] || { count: 0, last: [] };
    $("detail-dead").hidden = !dead.count;
    setText($("dead-count"), dead.count ? `${dead.count} (the last ${dead.last.length} below; rtfshost dead-letters lists all)` : "");
    const dl = $("dead-letters");
    dl.innerHTML = "";
    for (const d of dead.last.slice().reverse()) {
      const li = el("li", "", "");
      li.append(el("span", "muted", `#${d.seq} · ${new Date(d["at-epoch-ms"]).toLocaleString()} · `), el("span", "err", d.error), el("code", "", " " + JSON.stringify(d.chunk)));
      dl.append(li);
    }
    const now = Date.now() + model.skew;
    kv($("detail-overview"), [
      ["endpoint", info.endpoint], ["processor", info.processor], ["transport", info.transport && info.transport.kind],
      ["server", info.transport && info.transport["server-url"]], ["started", new Date(info["started-at-epoch-ms"]).toLocaleString()],
      ["age", fmtAge((info["ended-at-epoch-ms"] || now) - info["started-at-epoch-ms"])], ["cursor", info.cursor], ["end reason", st["end-reason"]],
      ["message", st.message], ["result", info.result === null ? "" : JSON.stringify(info.result)],
    ]);
    const s = info.stats || {};
    kv($("detail-stats"), [
      ["processed", fmtInt(s["processed-chunks"])], ["queued", `${s["queued-chunks"]} / ${info["queue-capacity"]}`],
      ["dropped", s["dropped-chunks"]], ["rate", fmtRate(s["chunks-per-second"] || 0) + " (lifetime)"],
      ["last latency", s["last-latency-ms"] === null ? "" : s["last-latency-ms"] + " ms"],
      ["reconnects", s.reconnects], ["received", fmtBytes(s["bytes-received"])], ["outputs", s.outputs],
      ["outputs dropped", Object.entries(s["dropped-outputs"] || {}).filter(([, n]) => n).map(([p, n]) => `${n} ${p}`).join(", ")],
    ]);
    const p = info.progress;
    setProgress($("detail-progress"), p ? p.fraction : null, p ? p["eta-ms"] : null, p ? (p.message || p.milestone || "") : "", true);
    replaceTree($("state-tree"), info["current-state"], "state");
    replaceTree($("inspect-tree"), info, "inspect");
    renderDetailSpark();
    if (!outputs && info["last-output"] !== null && info["last-output"] !== undefined) {
      addOutput({ stream: ui.watch, seq: null, at: info["observed-at-epoch-ms"], output: info["last-output"], last: true });
    }
  }
  function renderDetailSpark() {
    const r = model.rows.get(ui.watch);
    const box = $("detail-spark");
    if (!r) { box.innerHTML = ""; return; }
    if (!box.firstChild) box.innerHTML = '<svg class="spark" width="100%" height="48" viewBox="0 0 300 48" preserveAspectRatio="none"><polygon class="area"/><polyline/></svg>';
    drawSpark(box.firstChild, r.rates, 300, 48);
  }
  function fmtBytes(n) {
    if (n < 1024) return n + " B";
    if (n < 1 << 20) return (n / 1024).toFixed(1) + " KiB";
    return (n / (1 << 20)).toFixed(1) + " MiB";
  }
  function detailGone(msg) {
    if (msg.stream !== ui.watch) return;
    notice(msg.error);
    for (const b of ["btn-pause", "btn-resume", "btn-retry", "btn-skip", "btn-cancel"]) $(b).disabled = true;
  }
  function notice(text) {
    const n = $("detail-notice");
    n.textContent = text; n.hidden = !text;
  }

  // The tree keeps which nodes are open across updates, by path.
  const openPaths = new Set(["state", "inspect", "inspect.status", "inspect.stats"]);
  function replaceTree(box, value, root) {
    const frag = document.createDocumentFragment();
    frag.append(tree(value, root, null));
    box.replaceChildren(frag);
  }
  function tree(v, path, key) {
    const label = key === null ? [] : [el("span", "k", key), ": "];
    if (v !== null && typeof v === "object") {
      const entries = Array.isArray(v) ? v.map((x, i) => [String(i), x]) : Object.entries(v);
      const d = el("details");
      d.open = openPaths.has(path) || (path.split(".").length <= 2 && entries.length <= 12);
      d.addEventListener("toggle", () => { d.open ? openPaths.add(path) : openPaths.delete(path); });
      const sum = el("summary");
      sum.append(...label, el("span", "z", Array.isArray(v) ? `[${entries.length}]` : `{${entries.length}}`));
      d.append(sum);
      const shown = entries.slice(0, 500);
      for (const [k, x] of shown) d.append(tree(x, path + "." + k, k));
      if (entries.length > shown.length) d.append(el("div", "leaf z", `… ${entries.length - shown.length} more`));
      return d;
    }
    const leaf = el("div", "leaf");
    let cls = "z", text = "null";
    if (typeof v === "string") { cls = "s"; text = JSON.stringify(v); }
    else if (typeof v === "number" || typeof v === "boolean") { cls = "n"; text = String(v); }
    leaf.append(...label, el("span", cls, text));
    return leaf;
  }

  // The timeline: the stream's start, the directives applied (who gave
  // them, on which chunk), its reconnects and its end, with their times.
  function renderTimeline(msg) {
    if (msg.stream !== ui.watch) return;
    const list = $("timeline");
    const items = (msg.events || []).map((ev) => {
      const li = el("li", "tl-" + ev.kind);
      li.dataset.kind = ev.kind;
      const t = new Date(ev["at-epoch-ms"]);
      li.append(el("time", "at", t.toLocaleTimeString([], { hour12: false }) + "." + String(t.getMilliseconds()).padStart(3, "0")));
      li.append(el("span", "kind", ev.kind));
      const what = [];
      if (ev.source) what.push("by " + ev.source);
      if (ev.chunk) what.push("on chunk " + ev.chunk);
      if (ev.message) what.push(ev.message);
      li.append(el("span", "what", what.join(", ")));
      return li;
    });
    list.replaceChildren(...items.reverse());
    $("timeline-count").textContent = msg.dropped ? `(${msg.dropped} older not shown)` : "";
  }

  function addOutput(ev) {
    if (ev.stream !== ui.watch) return;
    outputs++;
    const list = $("outputs");
    const li = el("li");
    li.append(el("span", "seq", ev.seq === null || ev.seq === undefined ? "last" : "#" + ev.seq), JSON.stringify(ev.output));
    if (ev.count > 1) li.append(el("span", "muted", ` ×${ev.count}${ev.kind ? " " + ev.kind : ""}`));
    if (ev.priority && ev.priority !== "normal") li.classList.add("prio-" + ev.priority);
    list.prepend(li);
    while (list.children.length > 100) list.lastChild.remove();
    $("outputs-count").textContent = `(${outputs} since opened)`;
  }

  function addDropped(ev) {
    if (ev.stream !== ui.watch) return;
    const li = el("li", "muted", `… ${ev.count} low-priority outputs dropped (this tab fell behind on them)`);
    $("outputs").prepend(li);
  }

  async function act(op) {
    const id = ui.watch;
    notice("");
    try {
      const res = await fetch(API + "streams/" + encodeURIComponent(id) + "/" + op, {
        method: "POST", headers: headers({ "X-CSRF-Token": csrf, "Content-Type": "application/json" }), body: "{}",
      });
      if (res.status === 401) { askToken(true); return; }
      const body = await res.json().catch(() => ({}));
      if (!res.ok) notice(body.error || "HTTP " + res.status);
    } catch (e) { notice(String(e)); }
  }
  for (const op of ["pause", "resume", "cancel", "skip"]) $("btn-" + op).addEventListener("click", () => act(op));
  $("btn-retry").addEventListener("click", () => act("resume")); // a failed stream's resume retries its chunk

  // ---- navigation and keys --------------------------------------------------
  function route() {
    const m = location.hash.match(/^#\/streams\/(.+)$/);
    if (m) showDetail(decodeURIComponent(m[1])); else showList();
    if (csrf) connect();
  }
  window.addEventListener("hashchange", route);
  $("filter").addEventListener("input", (e) => { ui.text = e.target.value.trim().toLowerCase(); ui.page = 0; schedule(); });
  $("state-filter").addEventListener("change", (e) => setStateFilter(e.target.value));
  $("prev").addEventListener("click", () => { ui.page = Math.max(0, ui.page - 1); schedule(); });
  $("next").addEventListener("click", () => { ui.page++; schedule(); });
  document.addEventListener("keydown", (e) => {
    if (e.target.closest("input, select, textarea, dialog")) { if (e.key === "Escape") e.target.blur(); return; }
    if (e.key === "/") { e.preventDefault(); if (ui.watch) location.hash = "#/"; $("filter").focus(); }
    else if (e.key === "[" && !ui.watch) { $("prev").click(); }
    else if (e.key === "]" && !ui.watch) { $("next").click(); }
    else if (e.key === "Escape" && ui.watch) { location.hash = "#/"; }
  });
  route();
  start();
})();
