// The AI sidebar of the notes app: a compact chat on the chat API, docked on the right (a
// drawer on a phone), coupled to the note editor (note_editor.js, window.NoteEditor).
//
// - The open note and its live selection or cursor are the note context of every message
//   (code points, as the API counts them); the note is saved first, so the model reads
//   what the user sees. A line under the transcript says what goes with the next message.
// - Edits a turn proposes for the open note are drawn inline in the editor
//   (handle.proposeEdits). Accepting one there applies it as one undo step of the editor
//   and saves it as one revision; the server is then told with
//   POST /api/v1/chat/edits/ID/accept?applied=true, which records the decision and leaves
//   the note alone, so the edit is never applied twice. Rejecting posts reject; an edit the
//   editor refuses (its text changed meanwhile) says why here and is rejected on the server.
//   Edits for another note are decided here, through the server.
// - One conversation per tab (sessionStorage), so a reload continues it and its running
//   answer; "New chat" starts another; "Open in Chat" shows it on the chat page.
// - Each message has the chat page's actions, on the same API: Copy (its Markdown), Regenerate
//   an answer, Edit a question and send it again; both make a branch, and the ‹ n/m › switcher
//   shows another (POST /messages/ID/show), so an old answer stays reachable. After any of
//   them the conversation is drawn afresh from the server, as the chat page does.
// - A turn's tool calls are drawn by tool_calls.js (NoteloomTools, shared with the chat page):
//   expandable, each with its result, from the tool's render spec when it has one.
// - On a phone it is a drawer that keeps the keyboard while open (NL.trapFocus); Escape
//   closes it and the focus goes back to where it was.
// - Shown or hidden with the header button or Ctrl+Shift+. ; remembered in localStorage.
//
// Hooks in app.js: it calls NoteloomSidebar.start() once signed in; it offers
// window.NoteloomApp.closeDrawers() (a phone shows one drawer at a time) and sends the window
// event "noteloom:drawer-open" when the tree or list drawer opens.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const h = (...a) => NL.h(...a);
  const PHONE = window.matchMedia("(max-width: 760px)");
  const OPEN_KEY = "noteloom.ai.open";
  const CONV_KEY = "noteloom.ai.conversation";
  const MODEL_KEY = "noteloom.ai.model";

  const state = {
    conv: null,          // the conversation id
    run: null,           // the answer being followed: {id, abort, lastSeq, text, bubble}
    sending: false,
    models: null,
    edits: new Map(),    // edit id -> {edit, ctx, card, shown: note id it is drawn in}
    contexts: new Map(), // assistant message id -> the selection sent with it, in editor positions
    handle: null,        // the editor handle the context line describes
    returnFocus: null,
    release: null,       // ends the phone drawer's focus trap (NL.trapFocus)
  };

  const codePoints = (text) => Array.from(text).length;

  // -- the panel --------------------------------------------------------------------------

  function build() {
    const aside = $("ai-sidebar");
    aside.replaceChildren(
      h("div", { class: "ai-head" },
        h("h2", { id: "ai-title", text: "Assistant" }),
        h("button", { type: "button", id: "ai-new", title: "Start a new conversation", text: "New chat" }),
        h("a", { id: "ai-open-chat", href: "/chat", text: "Open in Chat" }),
        h("button", { type: "button", id: "ai-close", "aria-label": "Close the assistant", title: "Close (Ctrl+Shift+.)", text: "×" })),
      h("div", { class: "ai-model-row" },
        h("label", { for: "ai-model", text: "Model" }),
        h("select", { id: "ai-model" }, h("option", { value: "", text: "Default" }))),
      h("ol", { id: "ai-transcript", class: "ai-transcript", "aria-label": "Conversation with the assistant" }),
      h("p", { id: "ai-status", class: "ai-status", role: "status" }),
      h("form", { id: "ai-form", class: "ai-form" },
        h("p", { id: "ai-context", class: "ai-context", text: "Context: no note open" }),
        h("label", { for: "ai-input", class: "sr-only", text: "Ask the assistant" }),
        h("textarea", { id: "ai-input", rows: "3", maxlength: "100000", placeholder: "Ask about this note… (Enter sends, Shift+Enter for a new line)",
          "aria-describedby": "ai-context" }),
        h("div", { class: "ai-form-actions" },
          h("button", { type: "submit", id: "ai-send", class: "primary", text: "Send" }),
          h("button", { type: "button", id: "ai-stop", hidden: true, text: "Stop" }))));
  }

  function say(text) {
    const el = $("ai-status");
    if (el.textContent !== text) el.textContent = text;
  }

  // -- shown or hidden --------------------------------------------------------------------

  const isOpen = () => (PHONE.matches ? $("ai-sidebar").classList.contains("open") : !$("ai-sidebar").hidden);

  function untrap() {
    if (state.release) state.release();
    state.release = null;
  }

  function layout() {
    const aside = $("ai-sidebar");
    if (!PHONE.matches || !aside.classList.contains("open")) untrap();
    if (PHONE.matches) {
      aside.hidden = false;  // a drawer: off-screen until opened
      $("app").classList.remove("ai-open");
      $("toggle-ai").setAttribute("aria-expanded", String(aside.classList.contains("open")));
    } else {
      aside.classList.remove("open");
      const on = localStorage.getItem(OPEN_KEY) !== "0";
      aside.hidden = !on;
      $("app").classList.toggle("ai-open", on);
      $("toggle-ai").setAttribute("aria-expanded", String(on));
    }
  }

  function open({ focus = true } = {}) {
    state.returnFocus = document.activeElement;
    if (PHONE.matches) {
      if (window.NoteloomApp) window.NoteloomApp.closeDrawers();
      $("ai-sidebar").classList.add("open");
      $("drawer-scrim").hidden = false;
      $("toggle-ai").setAttribute("aria-expanded", "true");
      // A drawer over the note: the keyboard stays in it until it closes (Escape closes it).
      if (!state.release) state.release = NL.trapFocus($("ai-sidebar"), { onEscape: () => close() });
    } else {
      localStorage.setItem(OPEN_KEY, "1");
      layout();
    }
    showContext();
    if (focus) $("ai-input").focus();
  }

  function close({ focus = true } = {}) {
    const within = $("ai-sidebar").contains(document.activeElement);
    if (PHONE.matches) {
      $("ai-sidebar").classList.remove("open");
      untrap();
      if (!document.querySelector(".drawer.open")) $("drawer-scrim").hidden = true;
      $("toggle-ai").setAttribute("aria-expanded", "false");
    } else {
      localStorage.setItem(OPEN_KEY, "0");
      layout();
    }
    if (focus && within) {
      const back = state.returnFocus;
      if (back && document.contains(back) && !$("ai-sidebar").contains(back) && back !== document.body) back.focus();
      else $("toggle-ai").focus();
    }
  }

  const toggle = () => (isOpen() ? close() : open());

  function onKey(e) {
    if (document.querySelector("dialog[open]")) return;
    if ((e.ctrlKey || e.metaKey) && e.shiftKey && !e.altKey && e.code === "Period") {
      e.preventDefault();
      // Open: to the message box; open with the focus elsewhere: there too; else close.
      if (isOpen() && $("ai-sidebar").contains(document.activeElement)) close();
      else open();
      return;
    }
    if (e.key === "Escape" && !e.defaultPrevented && PHONE.matches && isOpen()) { e.preventDefault(); close(); }
  }

  // -- the note beside it -----------------------------------------------------------------

  function editorHandle() {
    const hd = window.NoteEditor && window.NoteEditor.current;
    return hd && (typeof hd.connected !== "function" || hd.connected()) ? hd : null;
  }

  function noteTitle(hd) {
    const input = document.querySelector(`#note-pane .ne[data-note="${CSS.escape(hd.noteId)}"] .ne-title`);
    const title = input ? input.value : (hd.note() || {}).title;
    return (title || "").trim() || "(untitled)";
  }

  function showContext() {
    const hd = editorHandle();
    const line = $("ai-context");
    if (!hd) { line.textContent = "Context: no note open"; state.handle = null; return; }
    if (hd !== state.handle) { state.handle = hd; proposePending(); }
    const st = hd.editor.view.state;
    const r = st.selection.main;
    const n = r.empty ? 0 : codePoints(st.sliceDoc(r.from, r.to));
    const where = n ? `${n} character${n === 1 ? "" : "s"} selected` : `cursor at line ${st.doc.lineAt(r.head).number}`;
    line.textContent = `Context: ${noteTitle(hd)} · ${where}`;
  }

  // The note context of a message, and the selection in editor positions for placing edits.
  function noteContext(hd) {
    const r = hd.editor.view.state.selection.main;
    const ctx = { note_id: hd.noteId };
    if (!r.empty) ctx.selection = { start: hd.editor.toCodePoints(r.from), end: hd.editor.toCodePoints(r.to) };
    return { body: ctx, from: r.from, to: r.to };
  }

  // -- the model picker -------------------------------------------------------------------

  async function loadModels() {
    try {
      state.models = await NL.api("GET", "/api/v1/chat/models");
    } catch (err) {
      if (err.status !== 401) say(`Models not loaded: ${err.message}`);
      return;
    }
    const m = state.models;
    const select = $("ai-model");
    const keep = select.value || localStorage.getItem(MODEL_KEY) || "";
    select.replaceChildren(h("option", { value: "", text: m.default_model ? `Default (${m.default_model})` : "Default" }),
      ...m.models.map((x) => h("option", { value: x.id, text: x.private ? `${x.id} · private` : x.id })));
    if ([...select.options].some((o) => o.value === keep)) select.value = keep;
  }

  async function pickModel() {
    const model = $("ai-model").value;
    localStorage.setItem(MODEL_KEY, model);
    if (!state.conv) return;
    try {
      await NL.api("PATCH", `/api/v1/chat/conversations/${state.conv}`, { controls: { model: model || null } });
      say(`Model: ${model || "the default"}.`);
    } catch (err) {
      if (err.status !== 401) say(`Model not changed: ${err.message}`);
    }
  }

  // -- the conversation -------------------------------------------------------------------

  function setConversation(id) {
    state.conv = id;
    if (id) sessionStorage.setItem(CONV_KEY, id); else sessionStorage.removeItem(CONV_KEY);
    $("ai-open-chat").href = id ? `/chat/${encodeURIComponent(id)}` : "/chat";
  }

  function newConversation() {
    stopFollowing();
    setConversation(null);
    state.edits.clear();
    state.contexts.clear();
    $("ai-transcript").replaceChildren();
    say("New conversation.");
    $("ai-input").focus();
  }

  async function restore() {
    const id = sessionStorage.getItem(CONV_KEY);
    if (!id) return;
    let conv;
    try {
      conv = await NL.api("GET", `/api/v1/chat/conversations/${encodeURIComponent(id)}`);
    } catch (err) {
      if (err.status === 404 || err.status === 422) setConversation(null);
      else if (err.status !== 401) say(`The conversation could not be loaded: ${err.message}`);
      return;
    }
    if (conv.controls && conv.controls.model && [...$("ai-model").options].some((o) => o.value === conv.controls.model)) {
      $("ai-model").value = conv.controls.model;
    }
    drawConversation(conv);
  }

  // The conversation as the server has it (the branch it shows), following its running answer.
  function drawConversation(conv) {
    stopFollowing();
    setConversation(conv.id);
    const list = $("ai-transcript");
    list.replaceChildren();
    let asked = null;  // the note context went with the question; its answer's edits are placed by it
    for (const m of conv.messages) {
      if (m.role === "user") { list.append(userItem(m)); asked = m.note_context; }
      else if (m.role === "assistant") drawAnswer(m.note_context ? m : { ...m, note_context: asked });
    }
    const last = conv.messages[conv.messages.length - 1];
    if (last && last.role === "assistant" && last.status === "running") follow(last.id, last.last_seq, last.partial_text || "");
    scrollDown();
  }

  // A question: `m` as the API has it (id, content, branch).
  function userItem(m) {
    return h("li", { class: "ai-msg user", id: m.id ? `ai-msg-${m.id}` : null, "data-id": m.id },
      h("div", { class: "ai-who", text: "You" }), h("div", { class: "ai-bubble", text: m.content || "" }), m.id ? messageActions(m) : null);
  }

  function answerItem(id) {
    let li = $(`ai-msg-${id}`);
    if (!li) {
      li = h("li", { class: "ai-msg assistant", id: `ai-msg-${id}`, "data-id": id }, h("div", { class: "ai-who", text: "Assistant" }),
        h("div", { class: "ai-bubble" }), h("div", { class: "ai-cards" }));
      $("ai-transcript").append(li);
    }
    return li;
  }

  // A settled or running answer as the API has it: its text, its edits, its confirmation.
  function drawAnswer(m) {
    const li = answerItem(m.id);
    li.dataset.status = m.status;
    const bubble = li.querySelector(".ai-bubble");
    if (m.status === "running") {
      NoteloomRender.renderStreaming(bubble, m.partial_text || "");
    } else if (m.content) {
      NoteloomRender.renderInto(bubble, m.content, {}).catch(() => { if (m.content_html) NL.setHtml(bubble, m.content_html); });
    } else {
      bubble.replaceChildren();
    }
    drawTools(li, m.tool_calls || []);
    const sel = m.note_context && m.note_context.selection;
    if (sel && !state.contexts.has(m.id)) state.contexts.set(m.id, { codePoints: sel });
    for (const e of m.edits || []) addEdit(e);
    const cards = li.querySelector(".ai-cards");
    for (const c of cards.querySelectorAll(".ai-confirm, .ai-error")) c.remove();
    if (m.status === "awaiting_confirmation" && m.pending_action) cards.append(confirmCard(m));
    if (m.status === "failed" && m.error) {
      cards.append(h("div", { class: "ai-card ai-error", role: "alert" },
        h("strong", { text: "This answer failed: " }), m.error.message || m.error.code || "unknown error"));
    }
    if (m.status === "cancelled") cards.append(h("p", { class: "ai-error ai-muted", text: "Stopped." }));
    li.querySelector(".ai-msg-actions")?.remove();
    if (m.status !== "running" && m.status !== "awaiting_confirmation") li.append(messageActions(m));
    return li;
  }

  // The answer's tool calls as the API has them, drawn afresh; a result the user opened stays open.
  function drawTools(li, calls) {
    const old = li.querySelector(".tools");
    const opened = new Set(old ? [...old.querySelectorAll(".tool")].filter((t) => t.querySelector(".tool-result[open]")).map((t) => t.dataset.call) : []);
    const folded = old && !old.open;
    if (!calls.length) { if (old) old.remove(); return; }
    const fresh = NoteloomTools.list(calls);
    if (folded) fresh.open = false;
    for (const t of fresh.querySelectorAll(".tool")) if (opened.has(t.dataset.call)) t.querySelector(".tool-result")?.setAttribute("open", "");
    if (old) old.replaceWith(fresh); else li.querySelector(".ai-who").after(fresh);
  }

  // -- message actions: copy, regenerate, edit and send again, branches ---------------------

  function messageActions(m) {
    const what = m.role === "user" ? "Question" : "Answer";
    const bar = h("div", { class: "ai-actions ai-msg-actions", role: "group", "aria-label": `${what} actions` });
    if (m.branch) bar.append(NL.branchSwitch(m, (id) => showBranch(id, m.role), "ai-"));
    if (m.content) {
      const copy = h("button", { type: "button", class: "ai-copy", text: "Copy", title: "Copy the Markdown source" });
      copy.addEventListener("click", () => NL.copyText(copy, m.content, say));
      bar.append(copy);
    }
    if (m.role === "assistant") {
      const failed = m.status === "failed";
      bar.append(h("button", { type: "button", class: "ai-regenerate", text: failed ? "Retry" : "Regenerate",
        title: failed ? "Run this turn again" : "Ask again: a new answer beside this one", onclick: () => regenerate(m.id) }));
    }
    if (m.role === "user" && m.content) {
      bar.append(h("button", { type: "button", class: "ai-edit-resend", text: "Edit",
        title: "Change the question and send it again (the old one stays reachable)", onclick: () => editQuestion(m) }));
    }
    return bar;
  }

  const busy = () => {
    if (!state.run && !state.sending) return false;
    say("Wait for the running answer, or stop it, first.");
    return true;
  };

  // After a regenerate or an edit the conversation is drawn afresh: its path is what the
  // server sends the model next, and the new answer is followed from there.
  async function afterBranch(res) {
    if (res.privacy_warning) say(res.privacy_warning);
    drawConversation(await NL.api("GET", `/api/v1/chat/conversations/${encodeURIComponent(res.conversation_id)}`));
  }

  async function regenerate(messageId) {
    if (busy()) return;
    state.sending = true;
    try {
      await afterBranch(await NL.api("POST", `/api/v1/chat/messages/${messageId}/regenerate`));
    } catch (err) {
      if (err.status !== 401) say(`Not regenerated: ${err.message}`);
    } finally {
      state.sending = false;
    }
  }

  async function showBranch(messageId, role) {
    if (busy()) return;
    try {
      drawConversation(await NL.api("POST", `/api/v1/chat/messages/${messageId}/show`));
      const li = $(`ai-msg-${messageId}`);
      const count = li && li.querySelector(".ai-branch-count");
      if (count) say(`Showing version ${count.textContent} of this ${role === "user" ? "question" : "answer"}.`);
      const button = li && li.querySelector(".ai-branches button:not([disabled])");
      if (button) button.focus();
    } catch (err) {
      if (err.status !== 401) say(`Not shown: ${err.message}`);
    }
  }

  // The question becomes a box; Enter sends the new text as a branch beside the old one.
  function editQuestion(m) {
    if (busy()) return;
    const li = $(`ai-msg-${m.id}`);
    const box = h("textarea", { class: "ai-edit-box", rows: "3", maxlength: "100000", "aria-label": "Edit your question" });
    box.value = m.content || "";
    const status = h("span", { class: "ai-muted", role: "status" });
    const cancel = () => {
      const fresh = userItem(m);
      li.replaceWith(fresh);
      fresh.querySelector(".ai-edit-resend")?.focus();
    };
    const send = async () => {
      const text = box.value.trim();
      if (!text) { status.textContent = "The question must not be empty."; return; }
      if (busy()) return;
      state.sending = true;
      try {
        await afterBranch(await NL.api("POST", `/api/v1/chat/messages/${m.id}/edit`, { message: text }));
        say("Sent the edited question.");
      } catch (err) {
        if (err.status !== 401) status.textContent = `Not sent: ${err.message}`;
      } finally {
        state.sending = false;
      }
    };
    box.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); send(); }
      if (e.key === "Escape") { e.preventDefault(); cancel(); }
    });
    li.querySelector(".ai-bubble").replaceWith(h("div", { class: "ai-edit-form" }, box,
      h("div", { class: "ai-actions" },
        h("button", { type: "button", class: "primary", text: "Send", onclick: send }),
        h("button", { type: "button", text: "Cancel", onclick: cancel }), status)));
    li.querySelector(".ai-msg-actions")?.remove();
    box.focus();
  }

  function scrollDown() {
    const list = $("ai-transcript");
    list.scrollTop = list.scrollHeight;
  }

  // -- sending and following --------------------------------------------------------------

  async function send() {
    const input = $("ai-input");
    const text = input.value.trim();
    if (!text || state.run || state.sending) return;
    state.sending = true;
    try {
      const hd = editorHandle();
      let ctx = null;
      if (hd) {
        try {
          await hd.flush();
        } catch (err) {
          say(`Not sent: the note could not be saved first (${err.message}).`);
          return;
        }
        ctx = noteContext(hd);
      }
      const body = { message: text };
      if (ctx) body.note_context = ctx.body;
      if (state.conv) body.conversation_id = state.conv;
      else if ($("ai-model").value) body.controls = { model: $("ai-model").value };
      let res;
      try {
        res = await NL.api("POST", "/api/v1/chat/send", body);
      } catch (err) {
        if (err.status !== 401) say(`Not sent: ${err.message}`);
        return;
      }
      input.value = "";
      setConversation(res.conversation_id);
      $("ai-transcript").append(userItem({ id: res.user_message_id, role: "user", content: text }));
      if (ctx && ctx.to > ctx.from) state.contexts.set(res.message_id, { noteId: ctx.body.note_id, from: ctx.from, to: ctx.to });
      if (res.privacy_warning) say(res.privacy_warning);
      if (res.status === "running") {
        answerItem(res.message_id);
        follow(res.message_id, 0, "");
      } else {
        drawAnswer(await NL.api("GET", `/api/v1/chat/messages/${res.message_id}`));
      }
      scrollDown();
    } finally {
      state.sending = false;
    }
  }

  function setRunning(on) {
    $("ai-send").hidden = on;
    $("ai-stop").hidden = !on;
    $("ai-transcript").setAttribute("aria-busy", String(on));
  }

  function stopFollowing() {
    if (state.run) state.run.abort.abort();
    state.run = null;
    setRunning(false);
  }

  // Follow an answer's events from `afterSeq` (its text so far is `text`).
  function follow(messageId, afterSeq, text) {
    stopFollowing();
    const li = answerItem(messageId);
    li.dataset.status = "running";
    const run = { id: messageId, abort: new AbortController(), lastSeq: afterSeq, text, bubble: li.querySelector(".ai-bubble") };
    state.run = run;
    setRunning(true);
    say("Thinking…");
    readEvents(`/api/v1/chat/messages/${messageId}/events?after_seq=${afterSeq}`, run.abort.signal, (kind, ev) => onEvent(run, kind, ev))
      .catch((err) => err)
      .then((err) => {
        if (state.run !== run || run.abort.signal.aborted) return;
        if (err && err.status === 401) { stopFollowing(); return; }
        settle(run);  // the stream ended or dropped: the message says where the answer is
      });
  }

  function onEvent(run, kind, ev) {
    const seq = Number(ev.lastEventId);
    if (state.run !== run || !(seq > run.lastSeq)) return;
    run.lastSeq = seq;
    let data;
    try { data = JSON.parse(ev.data); } catch { return; }
    if (kind === "text") {
      run.text += data.text || "";
      NoteloomRender.renderStreaming(run.bubble, run.text);
      scrollDown();
    } else if (kind === "activity") {
      say(data.label || "Working…");
    } else if (kind === "tool_call") {
      const li = answerItem(run.id);
      NoteloomTools.addCall(li, data, (d) => li.querySelector(".ai-who").after(d));
    } else if (kind === "tool_result") {
      NoteloomTools.settleCall(answerItem(run.id), data);
    } else if (kind === "edit") {
      addEdit(data, run.id);
      scrollDown();
    } else if (kind === "done") {
      run.abort.abort();
      settle(run);
    }
  }

  async function settle(run) {
    if (state.run !== run) return;
    let m;
    try {
      m = await NL.api("GET", `/api/v1/chat/messages/${run.id}`);
    } catch (err) {
      if (err.status === 401) { stopFollowing(); return; }
      say(`Lost the answer: ${err.message}`);
      stopFollowing();
      return;
    }
    if (state.run !== run) return;
    if (m.status === "running") { follow(run.id, m.last_seq, m.partial_text || ""); return; }
    state.run = null;
    setRunning(false);
    drawAnswer(m);
    say({ complete: "Answer complete.", cancelled: "Stopped.", failed: "The answer failed.",
      awaiting_confirmation: "Waiting for your approval." }[m.status] || "");
    scrollDown();
  }

  async function stop() {
    const run = state.run;
    if (!run) return;
    say("Stopping…");
    try {
      const res = await NL.api("POST", `/api/v1/chat/messages/${run.id}/cancel`);
      if (res.already_settled) settle(run);
    } catch (err) {
      if (err.status !== 401) say(`Not stopped: ${err.message}`);
    }
  }

  // Server-sent events over fetch (EventSource cannot send the session header).
  async function readEvents(url, signal, onEvent) {
    const res = await NL.authFetch(url, { headers: { Accept: "text/event-stream" }, signal, cache: "no-store" });
    if (!res.ok) {
      const data = await res.json().catch(() => ({}));
      throw new NL.ApiError(data.message || `${res.status} ${res.statusText}`, res.status, data);
    }
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "", kind = "", data = [], lastEventId = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let nl;
      while ((nl = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, nl).replace(/\r$/, "");
        buffer = buffer.slice(nl + 1);
        if (line === "") {
          if (data.length) onEvent(kind || "message", { data: data.join("\n"), lastEventId });
          kind = ""; data = [];
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? "" : line.slice(colon + 1);
        if (val.startsWith(" ")) val = val.slice(1);
        if (field === "event") kind = val;
        else if (field === "data") data.push(val);
        else if (field === "id") lastEventId = val;
      }
    }
  }

  // -- confirmations ----------------------------------------------------------------------

  function confirmCard(m) {
    const p = m.pending_action;
    const names = p.names || [];
    const description = NL.actionDescription(p);
    const status = h("span", { class: "ai-muted", role: "status" });
    const decide = (decision) => async () => {
      try {
        const view = await NL.api("POST", `/api/v1/chat/messages/${m.id}/confirm`, { decision });
        card.remove();
        follow(m.id, view.last_seq, view.partial_text || "");
      } catch (err) {
        if (err.status !== 401) status.textContent = err.message;
      }
    };
    const card = h("div", { class: "ai-card ai-confirm", role: "group", "aria-label": "Approval needed" },
      h("strong", { text: `Approve ${p.tool.replaceAll("_", " ")}?` }),
      h("p", { text: description }),
      names.length ? h("ul", { class: "ai-named" }, ...names.map((n) => h("li", { text: NL.actionName(n) }))) : null,
      h("div", { class: "ai-actions" },
        h("button", { type: "button", class: "primary ai-approve", text: "Approve", onclick: decide("approve") }),
        h("button", { type: "button", class: "ai-decline", text: "Decline", onclick: decide("decline") }), status));
    return card;
  }

  // -- proposed edits ---------------------------------------------------------------------

  function diffView(edit) {
    const box = h("div", { class: "ai-diff", "aria-label": "Proposed change" });
    for (const part of edit.diff || []) {
      if (part.op === "equal") box.append(part.text);
      else if (part.op === "insert") box.append(h("ins", { text: part.text }));
      else box.append(h("del", { text: part.text }));
    }
    return box;
  }

  // An edit of a turn, once: its card, and drawn in the editor when its note is open.
  function addEdit(edit, messageId) {
    const known = state.edits.get(edit.id);
    if (known) {
      if (known.edit.status === "proposed" && edit.status !== "proposed") { known.edit = edit; drawCard(known); }
      if (!known.card.isConnected) answerItem(known.messageId).querySelector(".ai-cards").append(known.card);  // drawn afresh
      return;
    }
    const item = { edit, messageId: messageId || edit.message_id, card: null, shown: null, note: "" };
    state.edits.set(edit.id, item);
    const li = answerItem(item.messageId);
    item.card = h("div", { class: "ai-card ai-edit", id: `ai-edit-${edit.id}`, role: "group", "aria-label": "Proposed edit", tabindex: "-1" });
    li.querySelector(".ai-cards").append(item.card);
    drawCard(item);
    if (edit.status === "proposed") propose(item).catch((err) => drawCard(item, `Not shown in the note: ${err.message}`));
  }

  function drawCard(item, note) {
    if (note !== undefined) item.note = note;
    const e = item.edit;
    const label = { proposed: "Proposed edit", accepted: "Edit accepted", rejected: "Edit rejected", undone: "Edit undone" }[e.status];
    const card = item.card;
    card.className = `ai-card ai-edit ${e.status}`;
    const actions = h("div", { class: "ai-actions" });
    if (e.status === "proposed") {
      const inEditor = item.shown && editorHandle() && editorHandle().noteId === item.shown;
      actions.append(
        h("button", { type: "button", class: "primary ai-accept", text: "Accept", onclick: () => decide(item, true) }),
        h("button", { type: "button", class: "ai-reject", text: "Reject", onclick: () => decide(item, false) }));
      if (inEditor) actions.append(h("span", { class: "ai-muted", text: "Shown in the note: accept or reject it there or here." }));
    }
    const hadFocus = card.contains(document.activeElement);
    card.replaceChildren(h("strong", { text: `${label} · ${e.tool.replaceAll("_", " ")}` }), diffView(e), actions,
      h("p", { class: "ai-edit-note", role: "status", text: item.note }));
    if (hadFocus) card.focus();  // its buttons went with the decision: the focus stays here
  }

  // Where `edit` goes in the open editor (positions of the editor), or a reason it cannot.
  function place(item, hd) {
    const e = item.edit;
    const ed = hd.editor;
    const doc = ed.getDoc();
    if (e.tool === "append_to_note") return { from: doc.length, to: doc.length };
    const ctx = state.contexts.get(item.messageId);
    if (e.tool === "edit_selection" && ctx) {
      const span = ctx.codePoints ? { from: ed.fromCodePoints(ctx.codePoints.start), to: ed.fromCodePoints(ctx.codePoints.end) } : ctx;
      if (doc.slice(span.from, span.to) === e.old_text) return { from: span.from, to: span.to };
    }
    if (e.old_text) {
      const at = doc.indexOf(e.old_text);
      if (at >= 0 && doc.indexOf(e.old_text, at + 1) < 0) return { from: at, to: at + e.old_text.length };
      if (at >= 0) return { reason: "the text it changes occurs more than once in the note now" };
    }
    return { reason: "the text it changes is no longer in the note" };
  }

  async function propose(item) {
    const hd = editorHandle();
    if (!hd || hd.noteId !== item.edit.note_id || item.shown === hd.noteId) return;
    const where = place(item, hd);
    if (where.reason) { drawCard(item, `Not shown in the note: ${where.reason}.`); return; }
    item.shown = hd.noteId;
    item.handle = hd;
    await hd.proposeEdits([{ id: item.edit.id, from: where.from, to: where.to, insert: item.edit.new_text,
      original: item.edit.old_text, label: item.edit.tool.replaceAll("_", " ") }],
    { onDecision: (id, accepted, reason) => decided(item, hd, accepted, reason) });
    drawCard(item, "");
  }

  // The open note changed: draw the edits still proposed for it.
  function proposePending() {
    const hd = editorHandle();
    for (const item of state.edits.values()) {
      if (item.shown && (!hd || hd !== item.handle)) item.shown = null;
      if (item.edit.status === "proposed" && hd && item.edit.note_id === hd.noteId) {
        propose(item).catch((err) => drawCard(item, `Not shown in the note: ${err.message}`));
      }
    }
  }

  // A decision from the sidebar's buttons: in the editor when the edit is drawn there,
  // else through the server.
  async function decide(item, accept) {
    const hd = editorHandle();
    if (item.shown && hd && hd === item.handle && hd.editor.proposals().some((p) => p.id === item.edit.id)) {
      if (accept) hd.editor.acceptEdit(item.edit.id); else hd.editor.rejectEdit(item.edit.id);
      return;
    }
    try {
      const out = await NL.api("POST", `/api/v1/chat/edits/${item.edit.id}/${accept ? "accept" : "reject"}`);
      item.edit = out.edit;
      drawCard(item, accept ? "Applied to the note as a new version." : "");
      if (out.note && hd && hd.noteId === out.note.id) say("The note was changed by the assistant; reopen it to see the change.");
    } catch (err) {
      if (err.status !== 401) drawCard(item, `Not ${accept ? "accepted" : "rejected"}: ${err.message}`);
    }
  }

  // The editor decided: accepted (applied there as one undo step, saved as one revision),
  // rejected, or refused with a reason.
  async function decided(item, hd, accepted, reason) {
    if (accepted) {
      try {
        await hd.flush();
      } catch (err) {
        drawCard(item, `Applied in the note but not saved yet: ${err.message}`);
        return;
      }
      try {
        const out = await NL.api("POST", `/api/v1/chat/edits/${item.edit.id}/accept?applied=true`);
        item.edit = out.edit;
        if (out.note) hd.adopt(out.note);
        drawCard(item, "Applied in the note (Ctrl+Z there undoes it).");
        say("Edit accepted.");
      } catch (err) {
        if (err.status !== 401) drawCard(item, `Applied in the note, but the chat could not record it: ${err.message}`);
      }
      return;
    }
    const refused = reason && reason !== "rejected";
    try {
      const out = await NL.api("POST", `/api/v1/chat/edits/${item.edit.id}/reject`);
      item.edit = out.edit;
    } catch (err) {
      if (err.status === 401) return;
      if (!refused) { drawCard(item, `Not rejected: ${err.message}`); return; }
    }
    item.shown = null;
    drawCard(item, refused ? `Refused: ${reason}. Ask again for a fresh edit.` : "");
    say(refused ? `Edit refused: ${reason}.` : "Edit rejected.");
  }

  // -- wiring -----------------------------------------------------------------------------

  function wire() {
    build();
    $("toggle-ai").addEventListener("click", toggle);
    $("ai-close").addEventListener("click", () => close());
    $("ai-new").addEventListener("click", newConversation);
    $("ai-model").addEventListener("change", pickModel);
    $("ai-stop").addEventListener("click", stop);
    $("ai-form").addEventListener("submit", (e) => { e.preventDefault(); send().catch((err) => say(`Not sent: ${err.message}`)); });
    $("ai-input").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); send().catch((err) => say(`Not sent: ${err.message}`)); }
    });
    document.addEventListener("keydown", onKey);
    $("drawer-scrim").addEventListener("click", () => { if (PHONE.matches && isOpen()) close(); });
    window.addEventListener("noteloom:drawer-open", () => { if (PHONE.matches && isOpen()) close({ focus: false }); });
    window.addEventListener("noteloom:editor-selection", showContext);
    // The note pane is redrawn when another note opens (or none): the context follows.
    new MutationObserver(showContext).observe($("note-pane"), { childList: true });
    $("note-pane").addEventListener("input", (e) => { if (e.target.classList && e.target.classList.contains("ne-title")) showContext(); });
    PHONE.addEventListener("change", layout);
    layout();
    showContext();
  }

  // Called by app.js once signed in (NL.start takes one page script: a second would reload).
  function start() {
    wire();
    loadModels().then(restore).catch((err) => say(err.message));
  }

  window.NoteloomSidebar = { start, open, close, isOpen };
})();
