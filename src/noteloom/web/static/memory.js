// The memory page: your memories and the workspace's shared ones; add, edit, delete, search.
// AI-written memories carry an "AI" badge and a link to the chat or run they came from.
// Every request goes through session.js (NL.api: the session header, the sign-in form after a
// 401); every text goes in as textContent. /memory?m=ID opens with that memory in view.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const h = NL.h;
  const BASE = "/api/v1/memory";
  const enc = encodeURIComponent;

  const state = {
    rows: [],
    editing: null,  // the memory the form edits (null: a new one)
    query: "",
    scope: "",
  };

  function say(text) { $("status-line").textContent = text; }

  function showError(err, box = "page-error") {
    if (err && err.status === 401) return;  // the sign-in form is showing
    const el = $(box);
    el.textContent = err ? err.message : "";
    el.hidden = !err;
  }

  function localTime(ms) {
    const d = new Date(Number(ms));
    if (!Number.isFinite(d.getTime())) return NL.when(ms);
    return d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
  }

  // Where an AI-written memory came from: its chat, or its recipe run.
  function origin(m) {
    if (m.conversation_id) return h("a", { href: `/chat?c=${enc(m.conversation_id)}`, class: "memory-origin", text: "from a chat" });
    if (m.run_id) return h("a", { href: `/recipes/runs/${enc(m.run_id)}`, class: "memory-origin", text: "from a recipe run" });
    return h("span", { class: "memory-origin", text: "by the assistant" });
  }

  function item(m) {
    const line = h("div", { class: "memory-line" },
      h("span", { class: "memory-title", text: m.title || "(untitled)" }),
      h("span", { class: "scope-badge", text: m.scope === "shared" ? "Shared" : "Yours" }),
      m.by_ai ? h("span", { class: "ai-badge", title: "Written by the assistant", text: "AI" }) : null);
    const meta = h("div", { class: "memory-meta" },
      m.by_ai ? origin(m) : null, m.by_ai ? " · " : null,
      `changed ${localTime(m.updated_time)}`,
      ...m.tags.flatMap((t) => [" ", h("span", { class: "tag", text: `#${t}` })]));
    const actions = h("div", { class: "item-actions" },
      h("button", { type: "button", class: "edit", text: "Edit", "aria-label": `Edit ${m.title}`, onclick: () => openForm(m) }),
      h("button", { type: "button", class: "delete", text: "Delete", "aria-label": `Delete ${m.title}`, onclick: () => remove(m) }));
    return h("li", { class: "memory-item", id: `memory-${m.id}`, "data-id": m.id, "data-scope": m.scope, "data-ai": m.by_ai ? "1" : "0" },
      line, h("div", { class: "memory-content", text: m.content }), meta, actions);
  }

  function draw() {
    const list = $("memory-list");
    list.setAttribute("aria-busy", "false");
    if (!state.rows.length) {
      const empty = state.query ? `No memory matches “${state.query}”.` : "No memories yet: add one above, or ask the assistant to remember something.";
      list.replaceChildren(h("li", { class: "muted empty", text: empty }));
      return;
    }
    list.replaceChildren(...state.rows.map(item));
  }

  async function load() {
    const params = new URLSearchParams();
    if (state.scope) params.set("scope", state.scope);
    if (state.query) params.set("q", state.query);
    const qs = params.toString();
    state.rows = await NL.api("GET", qs ? `${BASE}?${qs}` : BASE);
    draw();
  }

  function openForm(m) {
    state.editing = m;
    showError(null, "form-error");
    $("form-title").textContent = m ? "Edit the memory" : "Add a memory";
    $("m-title").value = m ? m.title : "";
    $("m-content").value = m ? m.content : "";
    $("m-tags").value = m ? m.tags.join(", ") : "";
    $("m-shared").checked = false;
    $("m-scope-field").hidden = Boolean(m);  // a memory keeps its scope
    $("m-save").textContent = m ? "Save" : "Add";
    $("m-cancel").hidden = !m;
    if (m) $("m-content").focus();
  }

  function tagsTyped() {
    return $("m-tags").value.split(",").map((t) => t.trim()).filter(Boolean);
  }

  async function save(e) {
    e.preventDefault();
    showError(null, "form-error");
    const body = { title: $("m-title").value, content: $("m-content").value, tags: tagsTyped() };
    try {
      if (state.editing) {
        const saved = await NL.api("PATCH", `${BASE}/${enc(state.editing.id)}`, body);
        say(`Saved “${saved.title}”.`);
      } else {
        body.scope = $("m-shared").checked ? "shared" : "personal";
        const saved = await NL.api("POST", BASE, body);
        say(`Remembered “${saved.title}”.`);
      }
      openForm(null);
      await load();
    } catch (err) {
      showError(err, "form-error");
      const field = err && err.data && err.data.field;
      const input = field && { title: "m-title", content: "m-content", tags: "m-tags" }[field];
      if (input) $(input).focus();
    }
  }

  async function remove(m) {
    try {
      await NL.api("DELETE", `${BASE}/${enc(m.id)}`);
      if (state.editing && state.editing.id === m.id) openForm(null);
      say(`Deleted “${m.title}”.`);
      await load();
    } catch (err) {
      showError(err);
    }
  }

  async function search(e) {
    e.preventDefault();
    showError(null);
    state.query = $("m-search").value.trim();
    state.scope = $("m-filter").value;
    try { await load(); } catch (err) { showError(err); }
  }

  NL.start(() => {
    $("memory-form").addEventListener("submit", save);
    $("m-cancel").addEventListener("click", () => openForm(null));
    $("search-form").addEventListener("submit", search);
    $("m-filter").addEventListener("change", search);
    load().then(() => {
      const wanted = new URLSearchParams(location.search).get("m");
      const el = wanted && document.getElementById(`memory-${wanted}`);
      if (el) { el.setAttribute("aria-current", "true"); el.scrollIntoView({ block: "center" }); }
      document.body.setAttribute("data-ready", "1");
    }, showError);
  });
})();
