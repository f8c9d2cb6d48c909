// The recipes page: the list, a recipe with its runs, one run's trace, the mode-aware form,
// and the notifications badge. Every request goes through session.js (NL.api / NL.authFetch:
// the session header, the sign-in form after a 401); every text goes in as textContent.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const h = NL.h;
  const api = (method, path, body) => NL.api(method, path, body);
  const BASE = "/api/v1/recipes";
  const enc = encodeURIComponent;
  // A run in one of these may still change; the page keeps reading it.
  const LIVE = new Set(["queued", "running", "awaiting_approval"]);
  // What a new recipe starts with: the server's defaults (GET /options), in this browser's time zone.
  const NEW = {
    name: "", mode: "agent", prompt: "", tools: [], model: null, controls: {}, schedule: "manual",
    timezone: Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC", missed: "skip", budgets: {},
    job: null, job_config: {}, batch_size: 25, notify: { on_success: false, on_flagged: true }, signed_off: [],
    data_sources: null,
    allow_tainted_writes: false, enabled: true, pause_after: 5,
  };

  const state = {
    recipes: [],
    editing: null,       // the recipe the form edits (null: a new one)
    meta: null,          // {tools, jobs, models, notebooks} for the form, read once
    runTimer: null,
    runShown: "",        // the run view last drawn, to redraw only on change
    runSeq: 0,           // bumped whenever polling stops: an answer to an older read is dropped
    previewSeq: 0,
    previewTimer: null,
    notifications: true, // false once the server says it has no notifications API
  };

  // -- small helpers ------------------------------------------------------------------------

  function localTime(ms) {
    if (ms === null || ms === undefined) return "";
    const d = new Date(Number(ms));
    if (!Number.isFinite(d.getTime())) return NL.when(ms);
    return d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
  }

  // "2026-12-05T07:00+01:00" (the recipe's own zone) as "2026-12-05 07:00 +01:00".
  const fireTime = (iso) => (iso ? iso.replace("T", " ").replace(/([+-]\d\d:\d\d|Z)$/, " $1") : "");

  function money(usd) {
    if (usd === null || usd === undefined) return "cost unknown";
    const n = Number(usd);
    if (n === 0) return "$0";
    return Number.isFinite(n) ? `$${n < 0.01 && n > 0 ? n.toPrecision(2) : n.toFixed(n >= 1 ? 2 : 4)}` : `$${usd}`;
  }

  const tokens = (i, o) => `${Number(i || 0).toLocaleString()} in · ${Number(o || 0).toLocaleString()} out`;

  function statusBadge(status) {
    return h("span", { class: `status status-${status}`, "data-status": status, text: (status || "").replace(/_/g, " ") });
  }

  function pretty(value) {
    if (typeof value === "string") return value;
    try { return JSON.stringify(value, null, 2); } catch { return String(value); }
  }

  function say(text) { $("status-line").textContent = text; }

  function showError(err) {
    if (err && err.status === 401) return;  // the sign-in form is showing
    const box = $("page-error");
    box.textContent = err ? err.message : "";
    box.hidden = !err;
  }

  function link(path, text, cls) {
    return h("a", { href: path, class: cls, text, onclick: (e) => {
      if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey) return;
      e.preventDefault();
      go(path);
    } });
  }

  function showView(id) {
    for (const v of document.querySelectorAll("#detail .view")) v.hidden = v.id !== id;
  }

  // -- routing ------------------------------------------------------------------------------

  function go(path) {
    if (location.pathname !== path) history.pushState({}, "", path);
    route();
  }

  function route() {
    stopPolling();
    showError(null);
    const p = location.pathname;
    let m = /^\/recipes\/runs\/([0-9a-f]{32})$/.exec(p);
    if (m) return openRun(m[1]).catch(showError);
    m = /^\/recipes\/([0-9a-f]{32})$/.exec(p);
    markCurrent(m ? m[1] : null);
    if (m) return openRecipe(m[1]).catch(showError);
    document.title = "Recipes · noteloom";
    showView("empty-view");
    return loadWorkspaceSpend();
  }

  function markCurrent(id) {
    for (const li of $("recipe-list").children) {
      if (li.dataset.id) li.setAttribute("aria-current", li.dataset.id === id ? "true" : "false");
    }
  }

  // -- the list -----------------------------------------------------------------------------

  async function loadList() {
    const data = await api("GET", BASE);
    state.recipes = Array.isArray(data) ? data : (data.recipes || []);
    const list = $("recipe-list");
    list.replaceChildren(...state.recipes.map(recipeItem));
    if (!state.recipes.length) list.append(h("li", { class: "empty muted", text: "No recipes yet." }));
    list.removeAttribute("aria-busy");
    const m = /^\/recipes\/([0-9a-f]{32})$/.exec(location.pathname);
    markCurrent(m ? m[1] : null);
    loadPending().catch(() => {});
  }

  function recipeItem(r) {
    const last = r.last_run;
    const spend = r.spend_this_month || {};
    const paused = !r.enabled;
    return h("li", { class: `recipe-item${paused ? " paused" : ""}`, "data-id": r.id },
      h("div", { class: "recipe-line" }, link(`/recipes/${r.id}`, r.name, "recipe-link"),
        h("span", { class: `mode mode-${r.mode}`, text: r.mode })),
      h("div", { class: "sched", text: r.explain || r.schedule }),
      h("div", { class: "next" }, paused ? "Not scheduled" :
        r.next_fire ? `Next: ${fireTime(r.next_fire)}` : "No next run"),
      h("div", { class: "last" }, last ? h("span", {}, "Last: ", statusBadge(last.status), " ",
        link(`/recipes/runs/${last.run_id}`, localTime(last.created_time), "run-link")) : "Never run"),
      h("div", { class: "spend", text: `This month: ${spend.runs || 0} run${spend.runs === 1 ? "" : "s"} · ` +
        `${tokens(spend.input_tokens, spend.output_tokens)} · ${money(spend.cost_usd)}` }),
      paused ? h("div", { class: "paused-reason", text: `Paused${r.paused_reason ? `: ${r.paused_reason}` : ""}` }) : null,
      h("div", { class: "item-actions" },
        h("button", { type: "button", class: "run-now", text: "Run now", onclick: () => runNow(r.id) }),
        h("button", { type: "button", class: paused ? "resume" : "pause", text: paused ? "Resume" : "Pause",
          onclick: () => setPaused(r.id, !paused) })));
  }

  async function loadPending() {
    const parked = await api("GET", `${BASE}/pending`);
    const items = Array.isArray(parked) ? parked : (parked.runs || []);
    $("pending-list").replaceChildren(...items.map((p) => h("li", {},
      link(`/recipes/runs/${p.run_id}`, `${(p.recipe && p.recipe.name) || "A recipe"}: ${(p.held && p.held.tool) || "a call"}`))));
    $("pending-box").hidden = !items.length;
  }

  async function runNow(id) {
    try {
      const run = await api("POST", `${BASE}/${id}/runs`);
      const skipped = run.status === "skipped_overlap";
      say(skipped ? "The recipe is running already: this run was skipped." : "Run started.");
      // "Run started." stands for a live status only: a run that ended before the answer left
      // the server (a fast one on a busy machine) is still announced when its page first reads it.
      state.runSaid = `${run.run_id}:${skipped || LIVE.has(run.status) ? run.status : "started"}`;
      loadList().catch(showError);
      go(`/recipes/runs/${run.run_id}`);
    } catch (err) { showError(err); }
  }

  async function setPaused(id, pause) {
    try {
      await api("POST", `${BASE}/${id}/${pause ? "pause" : "resume"}`);
      say(pause ? "Paused." : "Resumed.");
      await loadList();
      if (location.pathname === `/recipes/${id}`) await openRecipe(id);
    } catch (err) { showError(err); }
  }

  // -- one recipe ---------------------------------------------------------------------------

  // Spend per day (days with none left out) and this month, as a small table.
  function spendTable(spend, id) {
    const days = (spend.days || []).filter((d) => d.runs || d.input_tokens || d.output_tokens);
    const month = spend.month || {};
    const rows = days.map((d) => h("tr", {}, h("td", { text: d.day }), h("td", { text: String(d.runs) }),
      h("td", { text: tokens(d.input_tokens, d.output_tokens) }), h("td", { text: money(d.cost_usd) })));
    rows.push(h("tr", { class: "total" }, h("th", { scope: "row", text: `This month (${month.month || ""})` }),
      h("td", { text: month.runs === undefined ? "" : String(month.runs) }),
      h("td", { text: month.tokens !== undefined ? `${Number(month.tokens).toLocaleString()} tokens`
        : tokens(month.input_tokens, month.output_tokens) }),
      h("td", { text: money(month.cost_usd) })));
    return h("table", { class: "runs spend", id },
      h("thead", {}, h("tr", {}, ...["Day", "Runs", "Tokens", "Cost"].map((t) => h("th", { scope: "col", text: t })))),
      h("tbody", {}, ...rows));
  }

  // The workspace's spending this month (chats and recipes together) against its monthly cap.
  async function loadWorkspaceSpend() {
    const box = $("workspace-spend");
    if (!box) return;
    try {
      const spend = await api("GET", `${BASE}/spend`);
      const m = spend.month || {};
      const cap = [];
      if (m.cap_tokens) cap.push(`${Number(m.cap_tokens).toLocaleString()} tokens`);
      if (m.cap_cost_usd !== null && m.cap_cost_usd !== undefined) cap.push(money(m.cap_cost_usd));
      box.replaceChildren(
        h("h2", { text: "This month's spending" }),
        h("p", { id: "cap-line", class: m.reached ? "form-error" : "muted",
          text: m.reached ? m.reached
            : cap.length ? `Monthly cap: ${cap.join(" and ")}; ${Math.round((m.fraction || 0) * 100)} % used (chats and recipes together).`
            : "No monthly cap is set (`noteloom recipes cap`)." }),
        spendTable(spend, "workspace-spend-table"));
      box.hidden = false;
    } catch (err) {
      box.hidden = true;
    }
  }

  async function openRecipe(id) {
    const [r, runs, spend] = await Promise.all([api("GET", `${BASE}/${id}`), api("GET", `${BASE}/${id}/runs`),
      api("GET", `${BASE}/${id}/spend`)]);
    document.title = `${r.name} · Recipes · noteloom`;
    const paused = !r.enabled;
    const view = $("recipe-view");
    const facts = h("dl", { class: "facts" });
    const fact = (k, v) => { if (v !== null && v !== undefined && v !== "") facts.append(h("dt", { text: k }), h("dd", {}, v)); };
    fact("Mode", r.mode === "agent" ? "Agent" : `Pipeline: ${r.job}`);
    fact("Schedule", `${r.explain}${r.schedule && r.explain !== r.schedule ? ` — ${r.schedule}` : ""}`);
    fact("Next run", paused ? "Not scheduled while paused" : r.next_fire ? fireTime(r.next_fire) : "None");
    fact("Model", r.model || "the default model");
    if (r.mode === "agent") fact("Tools", r.tools.length ? r.tools.join(", ") : "none");
    if (r.signed_off && r.signed_off.length) fact("Signed off", r.signed_off.join(", "));
    if (r.mode === "agent" && Array.isArray(r.data_sources)) fact("Data sources", r.data_sources.join(", ") || "none");
    if (r.failures) fact("Failures in a row", String(r.failures));
    if (paused) fact("Paused", r.paused_reason || "by you");
    const upcoming = (r.upcoming || []).length ? h("ol", { class: "upcoming" }, ...r.upcoming.map((t) => h("li", { text: fireTime(t) }))) : null;

    const runRows = runs.map((x) => h("tr", { "data-run": x.run_id },
      h("td", {}, statusBadge(x.status)),
      h("td", { text: x.trigger }),
      h("td", {}, link(`/recipes/runs/${x.run_id}`, localTime(x.created_time))),
      h("td", { text: tokens(x.usage && x.usage.input_tokens, x.usage && x.usage.output_tokens) }),
      h("td", { text: money(x.cost_usd) })));
    const table = runs.length ? h("table", { class: "runs" },
      h("thead", {}, h("tr", {}, ...["Status", "Trigger", "When", "Tokens", "Cost"].map((t) => h("th", { scope: "col", text: t })))),
      h("tbody", {}, ...runRows)) : h("p", { class: "muted", text: "No runs yet." });

    const notes = h("ul", { class: "recipe-notes" }, ...(r.notes || []).map((n) =>
      h("li", {}, h("span", { class: "muted", text: `${n.author || ""} ${localTime(n.created_time)}`.trim() + " " }), n.body || n.text || "")));
    const noteInput = h("input", { id: "note-input", "aria-label": "A note about this recipe", maxlength: "4000", placeholder: "Add a note (what to change next time …)" });
    const noteForm = h("form", { class: "note-form", onsubmit: async (e) => {
      e.preventDefault();
      if (!noteInput.value.trim()) return;
      try { await api("POST", `${BASE}/${id}/notes`, { body: noteInput.value }); await openRecipe(id); } catch (err) { showError(err); }
    } }, noteInput, h("button", { type: "submit", text: "Add note" }));

    view.replaceChildren(
      h("div", { class: "view-head" },
        h("h1", { id: "recipe-name", tabindex: "-1", text: r.name }),
        paused ? h("span", { class: "status status-paused", text: "paused" }) : null,
        h("span", { class: "spacer" }),
        h("button", { type: "button", class: "primary", id: "recipe-run", text: "Run now", onclick: () => runNow(id) }),
        h("button", { type: "button", id: "recipe-pause", text: paused ? "Resume" : "Pause", onclick: () => setPaused(id, !paused) }),
        h("button", { type: "button", id: "recipe-edit", text: "Edit", onclick: () => openForm(r).catch(showError) }),
        h("button", { type: "button", id: "recipe-delete", class: "danger", text: "Delete", onclick: () => removeRecipe(r) })),
      facts,
      upcoming ? h("h2", { text: "Next runs" }) : null, upcoming,
      r.prompt ? h("details", { class: "prompt" }, h("summary", { text: "Prompt" }), h("pre", { text: r.prompt })) : null,
      h("h2", { text: "Runs" }), table,
      h("h2", { text: "Spending" }), spendTable(spend, "recipe-spend"),
      h("h2", { text: "Notes" }), notes, noteForm);
    showView("recipe-view");
  }

  async function removeRecipe(r) {
    const btn = $("recipe-delete");
    if (btn.dataset.armed !== "1") {  // a second click confirms: no browser dialog
      btn.dataset.armed = "1";
      btn.textContent = "Delete: click again";
      return;
    }
    try {
      await api("DELETE", `${BASE}/${r.id}`);
      say(`Deleted ${r.name}.`);
      await loadList();
      go("/recipes");
    } catch (err) { showError(err); }
  }

  // -- one run ------------------------------------------------------------------------------

  function stopPolling() {
    if (state.runTimer) clearTimeout(state.runTimer);
    state.runTimer = null;
    state.runSeq += 1;
  }

  async function openRun(runId) {
    state.runShown = "";
    markCurrent(null);
    await refreshRun(runId);
  }

  async function refreshRun(runId) {
    stopPolling();
    const seq = state.runSeq;
    const run = await api("GET", `${BASE}/runs/${runId}`);
    if (location.pathname !== `/recipes/runs/${runId}`) return;  // the user went elsewhere meanwhile
    if (seq !== state.runSeq) return;  // a newer read started meanwhile: a stale status is neither drawn nor said
    const shown = JSON.stringify(run);
    if (shown !== state.runShown) {
      const first = !state.runShown;
      state.runShown = shown;
      drawRun(run);
      if (!first) loadList().catch(() => {});
      refreshCount();  // a run that parks, fails or ends may have notified
    }
    // The status line says when the run's status changes (polling redraws the run, not the line).
    const said = `${runId}:${run.status}`;
    if (state.runSaid && state.runSaid.startsWith(`${runId}:`) && state.runSaid !== said) {
      say(`Run ${(run.status || "").replace(/_/g, " ")}.`);
    }
    state.runSaid = said;
    if (LIVE.has(run.status)) {
      // Waiting for approval changes only when someone decides: look less often.
      state.runTimer = setTimeout(() => refreshRun(runId).catch(showError), run.status === "awaiting_approval" ? 3000 : 700);
    }
  }

  function drawRun(run) {
    const view = $("run-view");
    // Keep what the reader opened (a call's output) across redraws.
    const open = new Set([...view.querySelectorAll("details[open][data-key]")].map((d) => d.dataset.key));
    const name = (run.recipe && run.recipe.name) || "recipe";
    document.title = `Run of ${name} · noteloom`;
    const facts = h("dl", { class: "facts" });
    const fact = (k, v) => { if (v !== null && v !== undefined && v !== "") facts.append(h("dt", { text: k }), h("dd", {}, v)); };
    fact("Trigger", run.trigger);
    fact("Started", localTime(run.created_time));
    fact("Finished", run.finished_time ? localTime(run.finished_time) : null);
    fact("Model", run.model);
    fact("Tokens", tokens(run.usage && run.usage.input_tokens, run.usage && run.usage.output_tokens));
    fact("Cost", money(run.cost_usd));
    if (run.mode === "pipeline") fact("Items", `${run.items_done || 0} done · ${run.items_failed || 0} failed`);
    else fact("Tool calls", String(run.tool_calls || 0));
    if (run.dry_run) fact("Dry run", "yes: nothing was written");

    const live = LIVE.has(run.status);
    const parts = [
      h("div", { class: "view-head" },
        h("h1", { id: "run-title", tabindex: "-1" }, "Run of ",
          run.recipe && run.recipe.id ? link(`/recipes/${run.recipe.id}`, name) : name),
        h("span", { id: "run-status", class: "run-status", "data-status": run.status }, statusBadge(run.status)),
        h("span", { class: "spacer" }),
        live ? h("button", { type: "button", id: "run-stop", class: "danger", text: "Stop", onclick: () => stopRun(run.run_id) }) : null,
        !live && run.recipe && run.recipe.id ? h("button", { type: "button", id: "run-again", text: "Run again",
          onclick: () => runNow(run.recipe.id) }) : null),
      facts,
    ];
    if (run.status === "awaiting_approval" && run.held) parts.push(approvalCard(run));
    if (run.error) parts.push(h("p", { class: "form-error run-error", role: "alert", text: run.error }));
    if (run.output) parts.push(h("h2", { text: "Output" }), h("div", { class: "run-output", id: "run-output", text: run.output }));
    if (run.items) parts.push(h("h2", { text: "Items" }), itemsTable(run.items));
    if (run.trace) {
      parts.push(h("h2", { text: "Tool calls" }));
      parts.push(run.trace.length ? h("ol", { class: "trace", id: "trace" }, ...run.trace.map(traceCall))
        : h("p", { class: "muted", text: live ? "No tool calls yet." : "No tool calls." }));
    }
    const notes = (run.notes || []).filter(Boolean);
    if (notes.length) parts.push(h("ul", { class: "run-notes" }, ...notes.map((t) => h("li", { class: "muted", text: t }))));
    view.replaceChildren(...parts);
    for (const d of view.querySelectorAll("details[data-key]")) if (open.has(d.dataset.key)) d.open = true;
    showView("run-view");
  }

  function traceCall(c, i) {
    const key = c.call_id || `${i}`;
    const clock = (ms) => new Date(Number(ms)).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit" });
    const span = c.started_time ? `${clock(c.started_time)} – ${c.finished_time ? clock(c.finished_time) : "running"}` : "";
    const secs = c.started_time && c.finished_time ? ` (${((c.finished_time - c.started_time) / 1000).toFixed(1)} s)` : "";
    return h("li", { class: `trace-call${c.is_error ? " error" : ""}`, "data-tool": c.tool },
      h("div", { class: "call-head" }, h("code", { class: "call-tool", text: c.tool }),
        c.is_error ? h("span", { class: "status status-failed", text: "error" }) : null,
        c.outcome && !c.is_error && c.outcome !== "ok" ? h("span", { class: "status", text: c.outcome }) : null,
        h("span", { class: "muted", text: span + secs })),
      h("details", { class: "call-input", "data-key": `${key}:in` }, h("summary", { text: "Input" }), h("pre", { text: pretty(c.input) })),
      c.output !== null && c.output !== undefined ? h("details", { class: "call-output", "data-key": `${key}:out` },
        h("summary", { text: "Output" }), h("pre", { text: pretty(c.output) })) : null,
      c.error ? h("p", { class: "form-error", text: c.error }) : null);
  }

  function itemsTable(items) {
    if (!items.length) return h("p", { class: "muted", text: "No items judged." });
    return h("table", { class: "items", id: "items" },
      h("thead", {}, h("tr", {}, ...["Item", "Status", "Verdict", "Error"].map((t) => h("th", { scope: "col", text: t })))),
      h("tbody", {}, ...items.map((it) => h("tr", { "data-key": it.key || "" },
        h("td", { text: it.label || it.key || "" }),
        h("td", {}, statusBadge(it.status)),
        h("td", {}, it.verdict === null || it.verdict === undefined ? "" : h("pre", { class: "verdict", text: pretty(it.verdict) })),
        h("td", { class: "form-error", text: it.error || "" })))));
  }

  function approvalCard(run) {
    const held = run.held;
    const answer = async (decision, btn) => {
      for (const b of btn.parentElement.querySelectorAll("button")) b.disabled = true;
      try {
        await api("POST", `${BASE}/runs/${run.run_id}/decision`, { decision });
        say(decision === "approve" ? "Approved: the run goes on." : "Declined: the run goes on without that call.");
        await refreshRun(run.run_id);
      } catch (err) {
        showError(err);
        for (const b of btn.parentElement.querySelectorAll("button")) b.disabled = false;
      }
    };
    return h("div", { class: "card confirm approval", id: "approval" },
      h("h3", { text: "This run waits for your approval" }),
      h("p", { class: "held-description", text: held.description || `Call ${held.tool}` }),
      h("details", { "data-key": "held" }, h("summary", { text: `${held.tool} arguments` }), h("pre", { text: pretty(held.arguments) })),
      h("div", { class: "actions" },
        h("button", { type: "button", class: "primary", text: "Approve", onclick: (e) => answer("approve", e.currentTarget) }),
        h("button", { type: "button", text: "Decline", onclick: (e) => answer("decline", e.currentTarget) })));
  }

  async function stopRun(runId) {
    const btn = $("run-stop");
    if (btn) btn.disabled = true;
    try {
      await api("POST", `${BASE}/runs/${runId}/stop`);
      say("Stopping…");
      await refreshRun(runId);
    } catch (err) {
      showError(err);
      if (btn) btn.disabled = false;
    }
  }

  // -- the form -----------------------------------------------------------------------------

  async function loadMeta() {
    if (state.meta) return state.meta;
    const [options, jobs, models, notebooks] = await Promise.allSettled([
      api("GET", `${BASE}/options`), api("GET", `${BASE}/jobs`), api("GET", "/api/v1/chat/models"),
      api("GET", "/api/v1/notebooks"),
    ]);
    const ok = (r, fallback) => (r.status === "fulfilled" ? r.value : fallback);
    const opts = ok(options, null);
    if (opts && opts.defaults) Object.assign(NEW, opts.defaults, { timezone: NEW.timezone });
    state.meta = {
      tools: opts ? opts.tools : null,
      sources: opts && opts.data_sources ? opts.data_sources : null,
      jobs: ok(jobs, []),
      models: ok(models, { models: [], default_model: null }),
      notebooks: ok(notebooks, []),
    };
    return state.meta;
  }

  function clearErrors() {
    for (const p of document.querySelectorAll("#recipe-form .field-error")) { p.textContent = ""; p.hidden = true; }
    $("form-error").hidden = true;
    $("form-warnings").hidden = true;
  }

  // The API's error beside the field it names (or its nearest enclosing one), else on top.
  function fieldError(field, message) {
    const form = $("recipe-form");
    let name = field || "";
    while (name) {
      const box = form.querySelector(`.field-error[data-error-for="${CSS.escape(name)}"]`);
      if (box && !box.parentElement.closest("[hidden]")) {
        box.textContent = message;
        box.hidden = false;
        const input = box.closest(".field") && box.closest(".field").querySelector("input, select, textarea");
        if (input) input.focus();
        return;
      }
      name = name.includes(".") ? name.slice(0, name.lastIndexOf(".")) : "";
    }
    $("form-error").textContent = message;
    $("form-error").hidden = false;
  }

  function mode() { return $("f-mode-pipeline").checked ? "pipeline" : "agent"; }

  function drawMode() {
    const pipeline = mode() === "pipeline";
    $("agent-fields").hidden = pipeline;
    $("pipeline-fields").hidden = !pipeline;
    $("f-prompt-label").textContent = pipeline ? "Prompt (optional: empty uses the job's own)" : "Prompt";
    const job = currentJob();
    $("f-prompt").placeholder = pipeline ? (job ? job.default_prompt : "") : "What should the recipe do each run?";
  }

  function currentJob() {
    const name = $("f-job").value;
    return (state.meta ? state.meta.jobs : []).find((j) => j.name === name) || null;
  }

  function drawTools(recipe) {
    const box = $("tool-list");
    const tools = state.meta.tools;
    box.replaceChildren();
    if (!tools) {
      box.append(h("p", { class: "muted", text: "The tool list could not be read: name the tools, separated by commas." }),
        h("input", { id: "f-tools-text", "aria-label": "Tool names", value: recipe.tools.join(", ") }),
        h("label", { for: "f-signed-text", text: "Signed off (run without asking)" }),
        h("input", { id: "f-signed-text", value: recipe.signed_off.join(", ") }));
      return;
    }
    const known = new Set(tools.map((t) => t.name));
    const all = [...tools, ...recipe.tools.filter((n) => !known.has(n)).map((n) => ({ name: n, description: "not available in this app", missing: true }))];
    for (const t of all) {
      const reads = t.effect === "read";
      const use = h("input", { type: "checkbox", name: "tool", value: t.name, id: `tool-${t.name}`, checked: recipe.tools.includes(t.name) });
      const sign = h("input", { type: "checkbox", name: "signed_off", value: t.name, id: `sign-${t.name}`,
        checked: recipe.signed_off.includes(t.name), disabled: !use.checked || reads });
      use.addEventListener("change", () => { sign.disabled = !use.checked || reads; if (!use.checked) sign.checked = false; });
      const notes = [];
      if (!t.missing && t.enabled === false) notes.push("off in this workspace: skipped when the recipe runs");
      if (t.untrusted_output) notes.push("may read text others wrote");
      box.append(h("div", { class: `tool-choice${t.missing ? " missing" : ""}${t.enabled === false ? " disabled" : ""}` },
        h("label", { class: "check", for: `tool-${t.name}` }, use, " ", h("code", { text: t.name }),
          reads ? h("span", { class: "muted", text: " reads" }) : h("span", { class: "writes", text: " writes" }),
          notes.length ? h("span", { class: "muted", text: ` (${notes.join("; ")})` }) : ""),
        h("label", { class: "check sign", for: `sign-${t.name}`, title: "Let this recipe make calls that would ask first, without asking" },
          sign, " sign off"),
        h("span", { class: "muted tool-about", text: t.description.split("\n")[0] })));
    }
  }

  // The data sources the recipe may read: every opted-in one (data_sources null), or those ticked.
  function drawSources(recipe) {
    const box = $("data-list");
    const sources = state.meta.sources;
    box.replaceChildren();
    if (!sources) { box.append(h("p", { class: "muted", text: "The data sources could not be read; they stay as they are." })); return; }
    const chosen = recipe.data_sources;
    const every = h("input", { type: "checkbox", id: "f-data-all", checked: chosen === null || chosen === undefined });
    box.append(h("label", { class: "check", for: "f-data-all" }, every, " Every source the workspace opted in"));
    const known = new Set(sources.map((d) => d.name));
    const all = [...sources, ...(chosen || []).filter((n) => !known.has(n)).map((n) => ({ name: n, description: "not opted in: reads nothing", missing: true }))];
    if (!all.length) box.append(h("p", { class: "muted", text: "No data sources are opted in (under [data] in noteloom.toml)." }));
    const boxes = [];
    for (const d of all) {
      const pick = h("input", { type: "checkbox", name: "data_source", value: d.name, id: `data-${d.name}`,
        checked: !!chosen && chosen.includes(d.name), disabled: every.checked });
      boxes.push(pick);
      box.append(h("div", { class: `tool-choice${d.missing ? " missing" : ""}` },
        h("label", { class: "check", for: `data-${d.name}` }, pick, " ", h("code", { text: d.name })),
        h("span", { class: "muted tool-about", text: d.description })));
    }
    every.addEventListener("change", () => { for (const b of boxes) b.disabled = every.checked; });
  }

  function drawJobs(recipe) {
    const sel = $("f-job");
    const jobs = state.meta.jobs;
    sel.replaceChildren(...jobs.map((j) => h("option", { value: j.name, text: j.label || j.name })));
    if (recipe.job && !jobs.some((j) => j.name === recipe.job)) sel.append(h("option", { value: recipe.job, text: `${recipe.job} (not installed)` }));
    if (!jobs.length && !recipe.job) sel.append(h("option", { value: "", text: "No pipeline jobs are installed" }));
    sel.value = recipe.job || (jobs[0] ? jobs[0].name : "");
    drawJobConfig(recipe.job === sel.value ? recipe.job_config : {});
  }

  const firstType = (t) => (Array.isArray(t) ? t.find((x) => x !== "null") : t);

  // The job's settings, drawn from its config_schema: strings, numbers, booleans, enums, and
  // a notebook picker for a field named *notebook_id.
  function drawJobConfig(values) {
    const job = currentJob();
    const box = $("job-config-fields");
    box.replaceChildren();
    $("job-about").textContent = job ? (job.untrusted_digest ? "This job judges text others wrote: saving it needs the acknowledgment below." : "") : "";
    drawMode();
    const props = (job && job.config_schema && job.config_schema.properties) || {};
    const required = new Set((job && job.config_schema && job.config_schema.required) || []);
    if (!Object.keys(props).length) { box.append(h("p", { class: "muted", text: "This job has no settings." })); return; }
    for (const [key, prop] of Object.entries(props)) {
      const id = `cfg-${key}`;
      const type = firstType(prop.type);
      const value = key in values ? values[key] : prop.default;
      let input;
      if (Array.isArray(prop.enum)) {
        input = h("select", { id }, required.has(key) ? null : h("option", { value: "", text: "—" }),
          ...prop.enum.map((v) => h("option", { value: JSON.stringify(v), text: String(v) })));
        input.value = value === undefined || value === null ? "" : JSON.stringify(value);
      } else if (type === "boolean") {
        input = h("input", { id, type: "checkbox", checked: value === true });
      } else if (type === "integer" || type === "number") {
        input = h("input", { id, type: "number", step: type === "integer" ? "1" : "any", inputmode: type === "integer" ? "numeric" : "decimal",
          min: prop.minimum, max: prop.maximum, value: value === undefined || value === null ? "" : String(value) });
      } else if (type === "string" && key.endsWith("notebook_id")) {
        input = h("select", { id }, h("option", { value: "", text: required.has(key) ? "Choose a notebook" : "—" }),
          ...notebookOptions());
        if (value && ![...input.options].some((o) => o.value === value)) input.append(h("option", { value, text: `${value} (not found)` }));
        input.value = value || "";
      } else if (type === "array") {
        input = h("input", { id, value: Array.isArray(value) ? value.join(", ") : "", placeholder: "comma-separated" });
      } else {
        input = h("input", { id, value: value === undefined || value === null ? "" : String(value), maxlength: prop.maxLength });
      }
      input.dataset.config = key;
      input.dataset.kind = Array.isArray(prop.enum) ? "enum" : (type || "string");
      if (required.has(key)) input.required = true;
      const title = prop.title || key.replace(/_/g, " ");
      const label = type === "boolean" && !Array.isArray(prop.enum)
        ? h("label", { class: "check", for: id }, input, ` ${title}`)
        : h("label", { for: id, text: title + (required.has(key) ? "" : " (optional)") });
      box.append(h("div", { class: "field config-field", "data-field": key },
        label, type === "boolean" && !Array.isArray(prop.enum) ? null : input,
        prop.description ? h("span", { class: "muted", text: prop.description }) : null,
        h("p", { class: "field-error", "data-error-for": `job_config.${key}`, role: "alert", hidden: true })));
    }
  }

  function notebookOptions() {
    const books = state.meta.notebooks || [];
    const byId = new Map(books.map((b) => [b.id, b]));
    const path = (b) => { const names = []; for (let x = b, n = 0; x && n < 20; x = byId.get(x.parent_id), n++) names.unshift(x.title); return names.join(" / "); };
    return books.map((b) => ({ b, p: path(b) })).sort((a, c) => a.p.localeCompare(c.p))
      .map(({ b, p }) => h("option", { value: b.id, text: p }));
  }

  function readConfig() {
    const out = {};
    for (const input of document.querySelectorAll("#job-config-fields [data-config]")) {
      const key = input.dataset.config;
      const kind = input.dataset.kind;
      if (kind === "boolean") { out[key] = input.checked; continue; }
      const raw = input.value.trim();
      if (raw === "") continue;
      if (kind === "enum") out[key] = JSON.parse(raw);
      else if (kind === "integer" || kind === "number") out[key] = Number(raw);
      else if (kind === "array") out[key] = raw.split(",").map((s) => s.trim()).filter(Boolean);
      else out[key] = raw;
    }
    return out;
  }

  function drawModels(recipe) {
    const m = state.meta.models;
    const sel = $("f-model");
    sel.replaceChildren(h("option", { value: "", text: m.default_model ? `Default (${m.default_model})` : "Default" }),
      ...(m.models || []).map((o) => h("option", { value: o.id, text: o.id })));
    if (recipe.model && ![...sel.options].some((o) => o.value === recipe.model)) sel.append(h("option", { value: recipe.model, text: recipe.model }));
    sel.value = recipe.model || "";
  }

  const numText = (v) => (v === null || v === undefined ? "" : String(v));

  async function openForm(recipe) {
    stopPolling();
    state.editing = recipe;
    // Filled before it shows: nothing typed into it can be overwritten by the filling. The
    // server's defaults arrive with the rest of what the form offers.
    await loadMeta();
    if (state.editing !== recipe) return;  // another form was asked for meanwhile
    const r = { ...NEW, ...(recipe || {}) };
    r.controls = { ...(r.controls || {}) };
    r.budgets = { ...NEW.budgets, ...(recipe ? recipe.budgets : {}) };
    r.notify = { ...NEW.notify, ...(r.notify || {}) };
    $("form-title").textContent = recipe ? `Edit ${recipe.name}` : "New recipe";
    document.title = `${$("form-title").textContent} · Recipes · noteloom`;
    clearErrors();
    $("f-name").value = r.name;
    $(r.mode === "pipeline" ? "f-mode-pipeline" : "f-mode-agent").checked = true;
    $("f-prompt").value = r.prompt || "";
    drawTools(r);
    drawSources(r);
    drawJobs(r);
    $("f-batch-size").value = numText(r.batch_size);
    drawModels(r);
    $("f-thinking").value = r.controls.thinking_level || "";
    $("f-temperature").value = numText(r.controls.temperature);
    $("f-top-p").value = numText(r.controls.top_p);
    $("f-max-tokens").value = numText(r.controls.max_tokens);
    $("f-schedule").value = r.schedule;
    $("f-timezone").value = r.timezone;
    $("f-missed").value = r.missed;
    for (const input of document.querySelectorAll("[data-budget]")) input.value = numText(r.budgets[input.dataset.budget]);
    $("f-tainted").checked = !!r.allow_tainted_writes;
    $("f-notify-success").checked = !!r.notify.on_success;
    $("f-notify-flagged").checked = r.notify.on_flagged !== false;
    $("f-enabled").checked = r.enabled !== false;
    $("f-pause-after").value = numText(r.pause_after);
    drawMode();
    showView("form-view");
    previewSchedule();
    $("f-name").focus();
  }

  // The schedule in words and its next five fire times, as the server reads it.
  async function previewSchedule() {
    const seq = ++state.previewSeq;
    const schedule = $("f-schedule").value.trim();
    const timezone = $("f-timezone").value.trim() || "UTC";
    const box = $("schedule-preview");
    const err = $("schedule-error");
    if (!schedule) { box.replaceChildren(); err.hidden = true; return; }
    try {
      const p = await api("GET", `${BASE}/schedule?schedule=${enc(schedule)}&timezone=${enc(timezone)}`);
      if (seq !== state.previewSeq) return;
      err.hidden = true;
      err.textContent = "";
      const next = p.next || p.upcoming || [];
      box.replaceChildren(h("p", { class: "explain", text: p.explain }),
        next.length ? h("ol", { class: "upcoming", "aria-label": "Next fire times" }, ...next.map((t) => h("li", { text: fireTime(t) })))
          : h("p", { class: "muted", text: "It never fires on its own." }));
    } catch (e) {
      if (seq !== state.previewSeq || e.status === 401) return;
      box.replaceChildren();
      const data = e.data || {};
      if (data.field && data.field !== "schedule" && data.field !== "timezone") { err.textContent = e.message; }
      else if (data.field === "timezone") { fieldError("timezone", e.message); err.hidden = true; return; }
      else err.textContent = e.message;
      err.hidden = false;
    }
  }

  function schedulePreviewSoon() {
    clearTimeout(state.previewTimer);
    state.previewTimer = setTimeout(previewSchedule, 250);
  }

  function numberOrNull(id) {
    const raw = $(id).value.trim();
    if (raw === "") return null;
    const n = Number(raw);
    return Number.isFinite(n) ? n : raw;  // the server names a field it cannot read
  }

  function formBody() {
    const m = mode();
    const controls = {
      temperature: numberOrNull("f-temperature"), top_p: numberOrNull("f-top-p"),
      thinking_level: $("f-thinking").value || null, max_tokens: numberOrNull("f-max-tokens"),
    };
    const budgets = {};
    for (const input of document.querySelectorAll("[data-budget]")) {
      const raw = input.value.trim();
      budgets[input.dataset.budget] = raw === "" ? null : input.dataset.budget === "max_cost" ? raw : Number(raw);
    }
    const body = {
      name: $("f-name").value, mode: m, prompt: $("f-prompt").value, model: $("f-model").value || null, controls,
      schedule: $("f-schedule").value, timezone: $("f-timezone").value.trim() || "UTC", missed: $("f-missed").value,
      budgets, notify: { on_success: $("f-notify-success").checked, on_flagged: $("f-notify-flagged").checked },
      allow_tainted_writes: $("f-tainted").checked, enabled: $("f-enabled").checked,
      pause_after: numberOrNull("f-pause-after") ?? 5,
    };
    if (m === "agent") {
      const text = $("f-tools-text");
      const split = (s) => s.split(/[\s,]+/).filter(Boolean);
      body.tools = text ? split(text.value) : [...document.querySelectorAll("#tool-list input[name=tool]:checked")].map((i) => i.value);
      body.signed_off = text ? split($("f-signed-text").value)
        : [...document.querySelectorAll("#tool-list input[name=signed_off]:checked")].map((i) => i.value);
      const every = $("f-data-all");
      if (every) body.data_sources = every.checked ? null
        : [...document.querySelectorAll("#data-list input[name=data_source]:checked")].map((i) => i.value);
      body.job = null;
      body.job_config = {};
    } else {
      body.tools = [];
      body.signed_off = [];
      body.job = $("f-job").value || null;
      body.job_config = readConfig();
      body.batch_size = numberOrNull("f-batch-size") ?? 25;
    }
    return body;
  }

  async function save(e) {
    e.preventDefault();
    clearErrors();
    const btn = $("f-save");
    btn.disabled = true;
    try {
      const editing = state.editing;
      const saved = editing ? await api("PATCH", `${BASE}/${editing.id}`, formBody()) : await api("POST", BASE, formBody());
      await loadList();
      go(`/recipes/${saved.id}`);
      const warnings = saved.warnings || [];
      say(warnings.length ? `Saved, with ${warnings.length} warning${warnings.length > 1 ? "s" : ""}: ${warnings.join("; ")}` : "Saved.");
    } catch (err) {
      if (err.status === 401) return;
      const data = err.data || {};
      fieldError(data.field, err.message);
    } finally {
      btn.disabled = false;
    }
  }

  // -- notifications ------------------------------------------------------------------------

  async function refreshCount() {
    if (!state.notifications) return;
    try {
      const c = await api("GET", "/api/v1/notifications/count");
      const n = Number(c.unread || 0);
      const badge = $("notif-count");
      badge.textContent = String(n);
      badge.hidden = n === 0;
      $("notif-button").setAttribute("aria-label", `Notifications, ${n} unread`);
    } catch (err) {
      if (err.status === 404) {  // a server without the notifications API: no badge at all
        state.notifications = false;
        $("notif-button").parentElement.remove();
      }
    }
  }

  async function loadNotifications() {
    const data = await api("GET", "/api/v1/notifications?limit=30");
    const items = Array.isArray(data) ? data : (data.notifications || []);
    const list = $("notif-list");
    list.replaceChildren(...items.map((n) => h("li", { class: `notif-item${n.read_time ? "" : " unread"}`, "data-id": n.id },
      h("div", { class: "notif-line" }, h("span", { class: `kind kind-${n.kind}`, text: n.kind }),
        h("b", { text: n.title }), h("span", { class: "muted", text: localTime(n.created_time) })),
      n.body ? h("div", { class: "notif-body", text: n.body }) : null,
      h("div", { class: "notif-actions" },
        n.run_id ? h("button", { type: "button", text: "Open run", onclick: () => openNotification(n, `/recipes/runs/${n.run_id}`) })
          : n.recipe_id ? h("button", { type: "button", text: "Open recipe", onclick: () => openNotification(n, `/recipes/${n.recipe_id}`) }) : null,
        n.read_time ? null : h("button", { type: "button", text: "Mark read", onclick: () => markRead([n.id]) })))));
    if (!items.length) list.append(h("li", { class: "muted", text: "Nothing yet." }));
  }

  async function markRead(ids) {
    try {
      await api("POST", "/api/v1/notifications/read", ids === "all" ? { all: true } : { ids });
      await Promise.all([refreshCount(), loadNotifications()]);
    } catch (err) { showError(err); }
  }

  async function openNotification(n, path) {
    toggleNotifications(false);
    if (!n.read_time) markRead([n.id]);
    go(path);
  }

  function toggleNotifications(on) {
    const panel = $("notif-panel");
    const show = on === undefined ? panel.hidden : on;
    panel.hidden = !show;
    $("notif-button").setAttribute("aria-expanded", String(show));
    if (show) loadNotifications().catch(showError);
  }

  // -- start --------------------------------------------------------------------------------

  NL.start(() => {
    $("new-recipe").addEventListener("click", () => {
      if (location.pathname !== "/recipes") history.pushState({}, "", "/recipes");
      markCurrent(null);
      openForm(null).catch(showError);
    });
    $("recipe-form").addEventListener("submit", save);
    $("f-cancel").addEventListener("click", () => route());
    $("f-mode-agent").addEventListener("change", drawMode);
    $("f-mode-pipeline").addEventListener("change", drawMode);
    $("f-job").addEventListener("change", () => drawJobConfig(state.editing && state.editing.job === $("f-job").value ? state.editing.job_config : {}));
    $("f-schedule").addEventListener("input", schedulePreviewSoon);
    $("f-timezone").addEventListener("input", schedulePreviewSoon);
    $("notif-button").addEventListener("click", () => toggleNotifications());
    $("notif-read-all").addEventListener("click", () => markRead("all"));
    document.addEventListener("keydown", (e) => { if (e.key === "Escape" && !$("notif-panel").hidden) toggleNotifications(false); });
    window.addEventListener("popstate", () => route());
    try {
      const zones = Intl.supportedValuesOf ? Intl.supportedValuesOf("timeZone") : [];
      $("timezones").replaceChildren(...["UTC", ...zones].map((z) => h("option", { value: z })));
    } catch { /* an old browser: the field still takes any IANA name */ }
    refreshCount();
    setInterval(refreshCount, 30000);
    Promise.all([loadList(), route()]).then(() => document.body.setAttribute("data-ready", "1"), showError);
  });
})();
