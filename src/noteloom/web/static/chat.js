// The chat page: conversations, a streaming transcript, confirmations and proposed edits,
// beside a Markdown notes pane. Plain JS, no build step. Text from the server goes in with
// textContent; only the server's sanitised HTML (content_html, previews) goes in as HTML.
// Every request goes through session.js (NL.api / NL.authFetch: the session header, and the
// sign-in form on a 401); the turn's events stream over fetch, since EventSource cannot
// send a header. Files go with a message as multipart/form-data, and a message's files are
// fetched with the same header and shown as blob: URLs.
// Protected chats (private, fortress) are sealed at rest and read only while the user's vault
// is unlocked: a request that needs the vault answers 423 "locked", and the page then asks
// for the passphrase and repeats what the user was doing (open the chat, send the message).
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const EVENT_KINDS = ["status", "activity", "text", "thinking", "tool_call", "tool_result", "usage",
    "edit", "pending_action", "error", "done", "privacy_warning"];
  const state = {
    conv: null,            // the open conversation (API shape)
    run: null,             // the turn being streamed: {id, es, lastSeq, started, activity}; the one the view shows
    opening: 0,            // counts the conversation loads begun: only the newest one is drawn
    view: 0,               // counts the transcripts drawn: a reply meant for an earlier one is dropped
    note: null,            // the note open in the editor
    dirty: false,
    attach: true,          // send the open note with the next message
    files: [],             // files chosen for the next message: {file, key, preview}
    fileKey: 0,
    sending: false,        // a send (maybe a long upload) is on its way
    pendingControls: {},   // settings chosen before the conversation exists
    pendingLevel: "standard",  // the security level chosen before the conversation exists
    listed: new Map(),     // the conversations last listed, by id
    drawerModel: "",       // the model last chosen in the settings drawer ("" = the default)
    models: null,
    edits: {},             // edits decided on this page, by id
    warnings: {},          // privacy warnings said of a turn, by its message id (the view does not keep them)
    searchTimer: 0,
    noteTimer: 0,
    tick: 0,
    trash: false,          // the list shows deleted conversations
  };

  // -- helpers ----------------------------------------------------------------------------

  const api = (method, path, body) => NL.api(method, path, body);

  // Server-sent events over fetch: `onEvent(kind, {data, lastEventId})` per event; resolves
  // when the stream ends. `signal` aborts it.
  async function readEvents(url, signal, onEvent) {
    const res = await NL.authFetch(url, { headers: { Accept: "text/event-stream" }, signal, cache: "no-store" });
    if (!res.ok) {
      const data = await res.json().catch(() => ({}));
      throw new NL.ApiError(data.message || `${res.status} ${res.statusText}`, res.status, data);
    }
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    let kind = "", data = [], lastEventId = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let nl;
      while ((nl = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, nl).replace(/\r$/, "");
        buffer = buffer.slice(nl + 1);
        if (line === "") {  // the blank line ends an event
          if (data.length) onEvent(kind || "message", { data: data.join("\n"), lastEventId });
          kind = ""; data = [];
          continue;
        }
        if (line.startsWith(":")) continue;  // a comment (the server's keep-alive)
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? "" : line.slice(colon + 1);
        if (val.startsWith(" ")) val = val.slice(1);
        if (field === "event") kind = val;
        else if (field === "data") data.push(val);
        else if (field === "id" && !val.includes("\0")) lastEventId = val;
      }
    }
  }

  const h = NL.h;

  const LEVELS = { standard: "Standard", private: "Private", fortress: "Fortress" };
  // 423: the request needs the vault's unlock window, and this session has none open.
  const isLocked = (err) => err instanceof NL.ApiError && err.status === 423;
  // 422 on the level: a protected chat needs a vault to be sealed to, and there is none yet.
  const needsVault = (err) => err instanceof NL.ApiError && err.status === 422 && err.data
    && err.data.field === "security_level" && noVault();
  const noVault = () => Boolean(NL.vault.status()) && !NL.vault.status().exists;

  // Offsets in the API are code points; textarea offsets are UTF-16 units.
  const codePoints = (text, utf16) => Array.from(text.slice(0, utf16)).length;

  function announce(text) { $("live-status").textContent = text; }

  function money(usd) {
    if (usd === null || usd === undefined) return "cost unknown";
    const n = Number(usd);
    if (n === 0) return "$0";
    return n < 0.01 ? `$${n.toPrecision(2)}` : `$${n.toFixed(4)}`;
  }

  function usageLine(m) {
    if (!m.usage) return "";
    const u = m.usage;
    return `${u.input_tokens} in · ${u.output_tokens} out · ${money(m.cost_usd)}` + (m.model ? ` · ${m.model}` : "");
  }

  // -- conversations ------------------------------------------------------------------------

  async function loadConversations() {
    if (state.trash) return loadTrash();
    const q = $("thread-search").value.trim();
    const data = await api("GET", "/api/v1/chat/conversations" + (q ? `?search=${encodeURIComponent(q)}` : ""));
    const list = $("thread-list");
    list.replaceChildren();
    state.listed = new Map(data.conversations.map((c) => [c.id, c]));
    for (const c of data.conversations) list.append(threadItem(c));
    if (!data.conversations.length) list.append(h("li", { class: "muted", text: q ? "No match." : "No conversations yet." }));
    // A search while the vault is locked leaves protected chats out: said, never whether they matched.
    if (data.search_locked && data.message) list.append(h("li", { class: "muted search-locked", text: data.message }));
  }

  // -- the trash: deleted conversations, restore, and emptying it after a dry run -------------

  function toggleTrash() {
    state.trash = !state.trash;
    const b = $("trash-open");
    b.setAttribute("aria-pressed", String(state.trash));
    b.textContent = state.trash ? "Back to conversations" : "Trash";
    $("threads-title").textContent = state.trash ? "Trash" : "Conversations";
    $("thread-search").hidden = state.trash;
    loadConversations();
  }

  async function loadTrash() {
    const data = await api("GET", "/api/v1/chat/conversations?deleted=true&limit=500");
    const list = $("thread-list");
    list.replaceChildren();
    if (!data.conversations.length) { list.append(h("li", { class: "muted", text: "The trash is empty." })); return; }
    list.append(h("li", { class: "trash-head" }, h("button", { type: "button", class: "danger", id: "trash-empty",
      text: "Empty trash…", onclick: previewPurge })));
    for (const c of data.conversations) {
      const li = h("li", { class: "trashed", "data-id": c.id },
        h("span", { class: "thread trashed-title", text: c.title }),
        h("button", { type: "button", class: "restore", text: "Restore", "aria-label": `Restore ${c.title}`,
          onclick: async () => {
            try {
              await api("PATCH", `/api/v1/chat/conversations/${c.id}`, { deleted: false });
              announce(`Restored “${c.title}”.`);
              await loadTrash();
              $("trash-empty")?.focus();
            } catch (err) { announce(err.message); }
          } }));
      list.append(li);
    }
  }

  // A dry run first: what emptying the trash removes, by title and count; then the real thing.
  async function previewPurge() {
    let preview;
    try { preview = await api("DELETE", "/api/v1/chat/trash?dry_run=true"); } catch (err) { announce(err.message); return; }
    const t = preview.totals;
    const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;
    const card = h("div", { class: "card error purge-preview", role: "group", "aria-labelledby": "purge-title" },
      h("h3", { id: "purge-title", text: "Empty the trash for good?" }),
      h("p", { text: `This removes ${plural(t.conversations, "conversation", "conversations")}, `
        + `${plural(t.messages, "message", "messages")} and ${plural(t.attachments, "attachment", "attachments")}`
        + (t.files ? ` (${plural(t.files, "file", "files")} stored)` : "") + ". It cannot be undone." }),
      h("ul", {}, ...preview.conversations.map((c) => h("li", {
        text: `${c.title} — ${plural(c.messages, "message", "messages")}`
          + (c.attachments ? `, ${plural(c.attachments, "attachment", "attachments")}` : "") }))));
    const status = h("span", { class: "muted", role: "status" });
    const yes = h("button", { type: "button", class: "danger", text: "Empty trash", onclick: async () => {
      try {
        const done = await api("DELETE", "/api/v1/chat/trash");
        announce(`Trash emptied: ${plural(done.totals.conversations, "conversation", "conversations")} removed.`);
        await loadTrash();
        $("trash-open").focus();
      } catch (err) { status.textContent = err.message; }
    } });
    const no = h("button", { type: "button", text: "Cancel", onclick: async () => { await loadTrash(); $("trash-empty")?.focus(); } });
    card.append(h("div", { class: "actions" }, yes, no, status));
    const head = $("thread-list").querySelector(".trash-head");
    head.replaceChildren(card);
    yes.focus();
  }

  function threadItem(c) {
    const li = h("li", { "aria-current": state.conv && state.conv.id === c.id ? "true" : null, "data-id": c.id,
      "data-level": c.security_level || "standard", "data-locked": c.locked ? "true" : null });
    const open = h("button", { type: "button", class: "thread", title: c.locked ? "Locked chat: unlock your vault to open it" : c.title,
      onclick: () => openConversation(c.id) },
      c.pinned ? h("span", { class: "pin-mark", "aria-label": "Pinned", text: "📌 " }) : null,
      c.locked ? h("span", { class: "lock-mark icon icon-lock", role: "img", "aria-label": "Locked" })
        : c.protected ? h("span", { class: "level-mark icon icon-shield", role: "img", "aria-label": LEVELS[c.security_level] }) : null,
      c.title);
    const menu = h("details", { class: "thread-menu" },
      h("summary", { "aria-label": `Actions for ${c.title}`, text: "⋮" }),
      h("div", { class: "menu" },
        h("button", { type: "button", text: "Rename", onclick: () => renameInline(li, c) }),
        h("button", { type: "button", text: c.pinned ? "Unpin" : "Pin",
          onclick: () => patchConversation(c.id, { pinned: !c.pinned }) }),
        h("button", { type: "button", text: "Export", onclick: async () => { await openConversation(c.id); openExport(); } }),
        h("button", { type: "button", text: "Delete", onclick: () => confirmDelete(li, c) })));
    li.append(open, menu);
    return li;
  }

  function renameInline(li, c) {
    // A locked chat's title is a placeholder: the new one is typed afresh (and sealed).
    const input = h("input", { value: c.locked ? "" : c.title, "aria-label": "New title", maxlength: "200" });
    const done = async (save) => {
      if (save && input.value.trim() && input.value.trim() !== c.title) {
        await patchConversation(c.id, { title: input.value.trim() });
      } else {
        await loadConversations();
      }
    };
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter") { e.preventDefault(); done(true); }
      if (e.key === "Escape") { e.preventDefault(); done(false); }
    });
    input.addEventListener("blur", () => done(true), { once: true });
    li.replaceChildren(input);
    input.focus();
    input.select();
  }

  function confirmDelete(li, c) {
    const yes = h("button", { type: "button", class: "danger", text: "Delete", onclick: async () => {
      await api("DELETE", `/api/v1/chat/conversations/${c.id}`);
      if (state.conv && state.conv.id === c.id) newChat("replace");
      await loadConversations();
    } });
    const no = h("button", { type: "button", text: "Keep", onclick: () => loadConversations() });
    li.replaceChildren(h("span", { class: "muted", text: `Delete “${c.title}”?` }), yes, no);
    yes.focus();
  }

  async function patchConversation(id, body) {
    const conv = await api("PATCH", `/api/v1/chat/conversations/${id}`, body);
    if (state.conv && state.conv.id === id) {
      // Raised while the vault is locked: sealed at once, so it now reads as locked here too.
      if (conv.locked && !state.conv.locked) showLocked(conv);
      else { state.conv = { ...state.conv, ...conv }; showHeader(); }
    }
    await loadConversations();
    return conv;
  }

  // Every conversation has its address, /chat/ID; /chat is a new chat. `how`: "push" (a new
  // history entry: the user went somewhere), "replace" (the same place, corrected) or "none"
  // (Back or Forward brought us here: the address is already right).
  const conversationPath = (id) => (id ? `/chat/${encodeURIComponent(id)}` : "/chat");
  function go(path, how) {
    if (how === "none" || location.pathname === path) return;
    if (how === "replace") history.replaceState({ chat: true }, "", path);
    else history.pushState({ chat: true }, "", path);
  }
  function idFromPath() {
    const m = /^\/chat\/([^/]+)\/?$/.exec(location.pathname);
    return m ? decodeURIComponent(m[1]) : null;
  }

  function newChat(how = "push") {
    go(conversationPath(null), how);
    state.opening += 1;  // a conversation still loading is not drawn over the new chat
    state.view += 1;
    stopStream();
    state.conv = null;
    state.pendingControls = {};
    state.pendingLevel = "standard";
    $("locked-view").hidden = true;
    $("transcript").replaceChildren();
    forgetFileBlobs();
    $("empty-hint").hidden = false;
    showHeader();
    setRunning(false);
    loadConversations();
    $("message").focus();
  }

  // Opens the conversation; a protected one while the vault is locked shows as locked and
  // the unlock prompt opens (unlocking opens it then). False when it was not opened, or when
  // a newer open (or a new chat) began meanwhile: opens overlap (a reload reopens the chat of
  // its address while the user clicks it in the list) and only the newest is drawn. Until it
  // is drawn the view, and the turn it follows (what Cancel stops), stay as they are.
  async function openConversation(id, how = "push") {
    const token = ++state.opening;
    let conv;
    try {
      conv = await api("GET", `/api/v1/chat/conversations/${encodeURIComponent(id)}`);
    } catch (err) {
      if (token !== state.opening) return false;
      if (err instanceof NL.ApiError && (err.status === 404 || err.status === 422)) {
        // A bookmark of a chat that is gone (or was never this person's): said, then a new chat.
        newChat("replace");
        announce("That conversation does not exist (it may have been deleted).");
        showComposerError("That conversation does not exist (it may have been deleted). This is a new chat.");
        return false;
      }
      if (!isLocked(err)) throw err;
      go(conversationPath(id), how);
      showLocked(state.listed.get(id) || { id, protected: true });
      await loadConversations();
      askUnlock("This chat is protected: unlock your vault to open it.");
      return false;
    }
    if (token !== state.opening) return false;
    go(conversationPath(conv.id), how);
    drawConversation(conv);
    await loadConversations();
    return true;
  }

  // The conversation's shown path; a turn still running is followed from where the view ends
  // (so a reload, or another tab, picks the answer up as it goes on).
  function drawConversation(conv) {
    state.view += 1;
    stopStream();
    state.conv = conv;
    $("locked-view").hidden = true;
    const list = $("transcript");
    list.replaceChildren();
    forgetFileBlobs();
    for (const m of conv.messages) list.append(renderMessage(m));
    $("empty-hint").hidden = conv.messages.length > 0;
    showHeader();
    const last = conv.messages[conv.messages.length - 1];
    if (last && last.status === "running") startStream(last.id, last.last_seq, last.activity, true);
    else setRunning(false);
    scrollDown();
  }

  // The open conversation, sealed: its transcript goes, the locked view takes its place. The
  // composer stays: sending into it asks to unlock, then sends.
  function showLocked(conv) {
    state.view += 1;
    stopStream();
    state.conv = { ...conv, locked: true, title: "Locked chat" };  // the API's placeholder
    $("transcript").replaceChildren();
    forgetFileBlobs();
    $("empty-hint").hidden = true;
    $("locked-view").hidden = false;
    if (!$("settings").hidden) closeSettings();
    setRunning(false);
    showHeader();
  }

  function showHeader() {
    const c = state.conv;
    $("conv-title").textContent = c ? c.title : "New chat";
    $("export-open").disabled = !c || Boolean(c.locked);
    // A locked chat's settings cannot be shown (its instructions are sealed), so not changed here.
    $("settings-open").disabled = Boolean(c && c.locked);
    const level = c ? c.security_level || "standard" : state.pendingLevel;
    const button = $("level-open");
    button.dataset.level = level;
    button.replaceChildren(level === "standard" ? "" : h("span", { class: "icon icon-shield", "aria-hidden": "true" }), LEVELS[level]);
    button.setAttribute("aria-label", `Security level: ${LEVELS[level]}. Change it`);
    button.disabled = Boolean(c && c.locked);
    $("conv-usage").textContent = c && c.usage ? `${c.usage.input_tokens} in · ${c.usage.output_tokens} out · ${money(c.cost_usd)}${c.unpriced_turns ? "+" : ""}` : "";
  }

  // -- messages -------------------------------------------------------------------------------

  function renderMessage(m) {
    const li = h("li", { class: `msg ${m.role}`, id: `msg-${m.id}`, "data-id": m.id, "data-status": m.status });
    const who = { user: "You", assistant: "Assistant", note: "Note" }[m.role];
    li.append(h("div", { class: "who", text: who }));
    if (m.role === "user") {
      li.dataset.text = m.content || "";
      const files = m.attachments || [];
      if (m.content || !files.length) li.append(h("div", { class: "bubble", text: m.content || "" }));
      if (files.length) li.append(messageFiles(files));
      li.append(messageActions(m));
      return li;
    }
    if (state.warnings[m.id]) li.append(privacyCard(state.warnings[m.id]));
    if (m.thinking) li.append(thinkingBox(m.thinking));
    if (m.tool_calls && m.tool_calls.length) li.append(toolList(m.tool_calls));
    const bubble = h("div", { class: "bubble" });
    if (m.status === "running") {
      bubble.classList.add("streaming");
      bubble.setAttribute("aria-busy", "true");
      paintStreaming(bubble, m.partial_text || "");
    } else if (m.content_html) {
      paintSettled(bubble, m);
    } else {
      bubble.textContent = m.content || "";
    }
    li.append(bubble);
    if (m.status === "cancelled") li.append(h("span", { class: "marker", text: "Cancelled" }));
    if (m.stop_reason === "max_steps") li.append(h("span", { class: "marker", text: "Stopped: step limit reached" }));
    if (m.stop_reason === "budget_exceeded") li.append(h("span", { class: "marker", text: "Stopped: token or cost budget reached" }));
    for (const e of m.edits || []) li.append(editCard(newestEdit(e)));
    if (m.status === "awaiting_confirmation" && m.pending_action) li.append(confirmCard(m));
    if (m.status === "failed" && m.error) li.append(errorCard(m));
    if (m.memories && m.memories.length && m.status !== "running") li.append(rememberedLine(m.memories));
    if (m.role === "assistant" && m.status !== "running") li.append(h("div", { class: "meta", text: usageLine(m) }));
    if (m.status !== "running" && m.status !== "awaiting_confirmation") li.append(messageActions(m));
    return li;
  }

  // -- message actions: copy, regenerate, edit and send again, branches, delete the turn ---------

  function messageActions(m) {
    const bar = h("div", { class: "msg-actions", role: "group", "aria-label": `${m.role === "user" ? "Question" : "Answer"} actions` });
    if (m.branch) bar.append(NL.branchSwitch(m, (id) => showBranch(id), ""));
    const source = m.content || "";
    if (source) {
      const copy = h("button", { type: "button", class: "copy", text: "Copy", title: "Copy the Markdown source" });
      copy.addEventListener("click", () => NL.copyText(copy, source, announce));
      bar.append(copy);
    }
    if (m.role === "assistant" && m.status !== "failed") {
      bar.append(h("button", { type: "button", class: "regenerate", text: "Regenerate",
        title: "Ask again: a new answer beside this one", onclick: () => regenerate(m.id) }));
    }
    if (m.role === "user" && m.content) {
      bar.append(h("button", { type: "button", class: "edit-resend", text: "Edit",
        title: "Change the question and send it again (the old one stays reachable)", onclick: () => editQuestion(m) }));
    }
    if (m.role !== "note" || m.command) {
      bar.append(h("button", { type: "button", class: "delete-turn", text: "Delete",
        "aria-label": m.role === "note" ? "Delete this note" : "Delete this question and its answer",
        onclick: (e) => confirmDeleteTurn(e.currentTarget, m) }));
    }
    return bar;
  }

  // After a regenerate, an edit or a switch, the conversation is drawn afresh from the server:
  // its path is what the server will send the model next.
  async function afterBranch(res) {
    if (res.privacy_warning) state.warnings[res.message_id] = res.privacy_warning;
    drawConversation(await api("GET", `/api/v1/chat/conversations/${res.conversation_id}`));
    loadConversations();
  }

  function branchError(err, again) {
    if (isLocked(err)) askUnlock("This chat is protected: unlock your vault to go on.", again);
    else showComposerError(err.message);
  }

  async function regenerate(messageId) {
    if (state.run) { announce("Wait for the running answer, or cancel it, first."); return; }
    try {
      await afterBranch(await api("POST", `/api/v1/chat/messages/${messageId}/regenerate`));
      announce("Regenerating the answer…");
    } catch (err) { branchError(err, () => regenerate(messageId)); }
  }

  async function showBranch(messageId) {
    try {
      const conv = await api("POST", `/api/v1/chat/messages/${messageId}/show`);
      drawConversation(conv);
      const li = $(`msg-${messageId}`);
      const b = li?.querySelector(".branch-count");
      if (b) announce(`Showing version ${b.textContent}.`);
      li?.querySelector(".branches button:not([disabled])")?.focus();
    } catch (err) { branchError(err, () => showBranch(messageId)); }
  }

  function editQuestion(m) {
    if (state.run) { announce("Wait for the running answer, or cancel it, first."); return; }
    const li = $(`msg-${m.id}`);
    const box = h("textarea", { class: "edit-box", rows: "3", "aria-label": "Edit your question" });
    box.value = m.content || "";
    const status = h("span", { class: "muted", role: "status" });
    const cancel = () => li.replaceWith(renderMessage(m));
    const send = async () => {
      const text = box.value.trim();
      if (!text) { status.textContent = "The question must not be empty."; return; }
      try {
        await afterBranch(await api("POST", `/api/v1/chat/messages/${m.id}/edit`, { message: text }));
        announce("Sent the edited question.");
      } catch (err) {
        if (isLocked(err)) askUnlock("This chat is protected: unlock your vault to send.", send);
        else status.textContent = err.message;
      }
    };
    box.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); send(); }
      if (e.key === "Escape") { e.preventDefault(); cancel(); }
    });
    const files = (m.attachments || []).length;
    const form = h("div", { class: "edit-form" }, box,
      files ? h("p", { class: "muted", text: `The edited question goes without its ${files === 1 ? "file" : `${files} files`}: `
        + "attach them to a new message to send them again." }) : null,
      h("div", { class: "actions" },
      h("button", { type: "button", class: "primary", text: "Send", onclick: send }),
      h("button", { type: "button", text: "Cancel", onclick: cancel }), status));
    li.querySelector(".bubble")?.replaceWith(form);
    li.querySelector(".msg-actions")?.remove();
    box.focus();
  }

  function confirmDeleteTurn(button, m) {
    const bar = button.closest(".msg-actions");
    const what = m.role === "note" ? "this note" : "this question and its answer";
    const yes = h("button", { type: "button", class: "danger", text: "Delete", onclick: async () => {
      try {
        await api("DELETE", `/api/v1/chat/messages/${m.id}`);
        drawConversation(await api("GET", `/api/v1/chat/conversations/${state.conv.id}`));
        announce("Deleted.");
        $("message").focus();
      } catch (err) { announce(err.message); bar.replaceWith(messageActions(m)); }
    } });
    const no = h("button", { type: "button", text: "Keep", onclick: () => {
      const fresh = messageActions(m);
      bar.replaceWith(fresh);
      fresh.querySelector(".delete-turn")?.focus();
    } });
    bar.replaceChildren(h("span", { class: "muted", text: `Delete ${what}?` }), yes, no);
    yes.focus();
  }

  // A streaming answer's Markdown so far, by its bubble; drawn through the shared renderer
  // (render.js: markdown-it, then DOMPurify) when the page has it, else as plain text. Either
  // way nothing of the model's text reaches the page as unsanitised HTML.
  const streamed = new WeakMap();
  function paintStreaming(bubble, markdown) {
    streamed.set(bubble, markdown);
    const r = window.NoteloomRender;
    if (r && typeof r.renderStreaming === "function") {
      try {
        bubble.classList.add("md");
        Promise.resolve(r.renderStreaming(bubble, markdown)).catch(() => {
          if (streamed.get(bubble) === markdown) bubble.textContent = markdown;
        });
        return;
      } catch { /* below */ }
    }
    bubble.textContent = markdown;
  }

  // A settled answer: the server's sanitised HTML at once, then (with render.js) the page's
  // rendering of the same Markdown, which adds code highlighting, math and resolved note links.
  function paintSettled(bubble, m) {
    NL.setHtml(bubble, m.content_html);  // sanitised by the server
    const r = window.NoteloomRender;
    if (!r || typeof r.renderInto !== "function" || !m.content) return;
    bubble.classList.add("md");
    try {
      Promise.resolve(r.renderInto(bubble, m.content, {})).catch(() => NL.setHtml(bubble, m.content_html));
    } catch { NL.setHtml(bubble, m.content_html); }
  }

  // What the turn's prompt was given from memory: the memories in full by name, each a link
  // to it on the memory page, and the titles-only index folded.
  function rememberedLine(memories) {
    const link = (x) => h("a", { href: `/memory?m=${encodeURIComponent(x.id)}`, text: x.title });  // the memory page opens it in view
    const full = memories.filter((x) => x.layer === 1);
    const titles = memories.filter((x) => x.layer === 2);
    const box = h("div", { class: "remembered" }, h("span", { text: "Remembered: " }));
    full.forEach((x, i) => box.append(...(i ? [", ", link(x)] : [link(x)])));
    if (!full.length) box.append("no memory in full");
    if (titles.length) {
      box.append(h("details", { class: "remembered-titles" },
        h("summary", { text: `and the titles of ${titles.length} other memor${titles.length > 1 ? "ies" : "y"}` }),
        h("ul", {}, ...titles.map((x) => h("li", {}, link(x))))));
    }
    return box;
  }

  // The model is not private and the chat holds private content: said before the answer.
  function privacyCard(text) {
    return h("div", { class: "card confirm privacy-warning", role: "note" }, h("h3", { text: "Not a private model" }), h("p", { text }));
  }

  function thinkingBox(text) {
    return h("details", { class: "thinking" }, h("summary", { text: "Thinking" }), h("div", { class: "thinking-text", text }));
  }

  const toolList = (calls) => NoteloomTools.list(calls);  // tool_calls.js, shared with the sidebar

  function diffView(edit) {
    const box = h("div", { class: "diff", "aria-label": "Proposed change" });
    for (const part of edit.diff) {
      if (part.op === "equal") box.append(part.text);
      else if (part.op === "insert") box.append(h("ins", { text: part.text }));
      else box.append(h("del", { text: part.text }));
    }
    return box;
  }

  // A message fetched just before the user decided on an edit still shows it as proposed.
  const EDIT_RANK = { proposed: 0, accepted: 1, rejected: 1, undone: 2 };
  function newestEdit(edit) {
    const mine = state.edits[edit.id];
    return mine && EDIT_RANK[mine.status] > EDIT_RANK[edit.status] ? mine : edit;
  }

  function editCard(edit) {
    const card = h("div", { class: `card edit ${edit.status}`, id: `edit-${edit.id}`, role: "group", "aria-label": "Proposed edit" });
    const label = { proposed: "Proposed edit", accepted: "Edit applied", rejected: "Edit rejected", undone: "Edit undone" }[edit.status];
    card.append(h("h3", { text: `${label} · ${edit.tool.replaceAll("_", " ")}` }), diffView(edit));
    const actions = h("div", { class: "actions" });
    const status = h("span", { class: "muted", role: "status" });
    if (edit.status === "proposed") {
      actions.append(
        h("button", { type: "button", class: "primary", text: "Accept", onclick: () => decideEdit(edit, "accept", status) }),
        h("button", { type: "button", text: "Reject", onclick: () => decideEdit(edit, "reject", status) }));
    } else if (edit.status === "accepted") {
      actions.append(h("button", { type: "button", text: "Undo", onclick: () => decideEdit(edit, "undo", status) }));
    }
    actions.append(status);
    card.append(actions);
    return card;
  }

  async function decideEdit(edit, action, status) {
    try {
      if (action === "accept" && state.note && state.note.id === edit.note_id && state.dirty) await saveNote();
      const out = await api("POST", `/api/v1/chat/edits/${edit.id}/${action}`);
      state.edits[edit.id] = out.edit;
      $(`edit-${edit.id}`).replaceWith(editCard(out.edit));
      if (out.note && state.note && state.note.id === out.note.id) showNote(out.note);
      announce({ accept: "Edit applied to the note.", reject: "Edit rejected.", undo: "Edit undone." }[action]);
    } catch (err) {
      status.textContent = err.message;
    }
  }

  function confirmCard(m) {
    const p = m.pending_action;
    const names = p.names || [];
    const description = NL.actionDescription(p);
    const card = h("div", { class: "card confirm", role: "group", "aria-label": "Approval needed" },
      h("h3", { text: `Approve ${p.tool.replaceAll("_", " ")}?` }),
      h("p", { text: description }),
      names.length ? h("ul", { class: "named" }, ...names.map((n) => h("li", { class: `named-${n.kind}`, text: NL.actionName(n) }))) : null,
      h("details", {}, h("summary", { text: "Arguments" }), h("pre", { text: JSON.stringify(p.arguments, null, 2) })));
    const status = h("span", { class: "muted", role: "status" });
    const approve = h("button", { type: "button", class: "primary", text: "Approve", onclick: () => confirm(m.id, "approve", status) });
    const decline = h("button", { type: "button", text: "Decline", onclick: () => confirm(m.id, "decline", status) });
    card.append(h("div", { class: "actions" }, approve, decline, status));
    return card;
  }

  async function confirm(messageId, decision, status) {
    try {
      const view = await api("POST", `/api/v1/chat/messages/${messageId}/confirm`, { decision });
      const li = $(`msg-${messageId}`);
      li.querySelector(".card.confirm")?.remove();
      li.querySelector(".meta")?.remove();
      li.dataset.status = "running";
      const more = h("div", { class: "bubble streaming continued", "aria-busy": "true" });
      li.append(more);
      startStream(messageId, view.last_seq);
    } catch (err) {
      if (isLocked(err)) { askUnlock("This chat is protected: unlock your vault to decide.", () => confirm(messageId, decision, status)); return; }
      status.textContent = err.message;
    }
  }

  function errorCard(m) {
    const retry = h("button", { type: "button", text: "Retry", onclick: () => regenerate(m.id) });
    return h("div", { class: "card error", role: "alert" },
      h("h3", { text: "This answer failed" }),
      h("p", { text: m.error.message || m.error.code || "Unknown error" }),
      h("div", { class: "actions" }, retry));
  }

  function upsertMessage(m) {
    const fresh = renderMessage(m);
    const old = $(`msg-${m.id}`);
    if (old) old.replaceWith(fresh); else $("transcript").append(fresh);
    return fresh;
  }

  function scrollDown() {
    const t = $("transcript");
    t.scrollTop = t.scrollHeight;
  }

  // -- attached files ---------------------------------------------------------------------------
  // The composer keeps the chosen files as chips until the message is sent; the server decides
  // what it takes (the type from the bytes, the sizes, what the model can read) and its refusal
  // is shown with the text and the chips kept. Only the count is checked here, to say at once
  // why a sixth file was not added (the server's per-message cap is 5 unless configured).
  const MAX_FILES = 5;
  const KIND_LABELS = { image: "Image", pdf: "PDF", text: "Text", html: "HTML" };

  function fileSize(bytes) {
    const n = Number(bytes) || 0;
    if (n < 1024) return `${n} B`;
    if (n < 1024 * 1024) return `${Math.round(n / 1024)} KB`;
    return `${(n / (1024 * 1024)).toFixed(1)} MB`;
  }

  // The badge of a file still in the composer: a guess from its name and type, for the eye
  // only (the server reads the bytes).
  function badgeOf(file) {
    const ext = (/\.([A-Za-z0-9]{1,8})$/.exec(file.name) || [])[1];
    if (ext) return ext.toUpperCase();
    const sub = (file.type || "").split("/")[1];
    return sub ? sub.toUpperCase().slice(0, 8) : "FILE";
  }

  function addFiles(list) {
    const refused = [];
    for (const file of list) {
      if (state.files.length >= MAX_FILES) { refused.push(file.name); continue; }
      const preview = /^image\/(png|jpeg|gif|webp)$/.test(file.type) ? URL.createObjectURL(file) : null;
      state.files.push({ file, key: ++state.fileKey, preview });
    }
    const note = $("attach-error");
    if (refused.length) {
      note.textContent = `A message takes at most ${MAX_FILES} files, so ${refused.map((n) => `“${n}”`).join(", ")} `
        + `${refused.length > 1 ? "were" : "was"} not added. Remove one to add another, or send these first.`;
      note.hidden = false;
    } else {
      note.hidden = true;
    }
    drawFiles();
  }

  function removeFile(key) {
    const i = state.files.findIndex((f) => f.key === key);
    if (i < 0) return;
    const [gone] = state.files.splice(i, 1);
    if (gone.preview) URL.revokeObjectURL(gone.preview);
    $("attach-error").hidden = true;
    drawFiles();
    // Keyboard focus moves to the chip that took its place, or back to the attach button.
    const next = $("attach-list").querySelectorAll(".attach-remove")[Math.min(i, state.files.length - 1)];
    (next || $("attach-open")).focus();
  }

  function clearFiles() {
    for (const f of state.files) if (f.preview) URL.revokeObjectURL(f.preview);
    state.files = [];
    $("attach-error").hidden = true;
    drawFiles();
  }

  function drawFiles() {
    const list = $("attach-list");
    const kindClass = (badge) => ({ PDF: "pdf", HTML: "html", HTM: "html" })[badge] || "";
    list.replaceChildren(...state.files.map((f) => h("li", { class: `attach-chip ${kindClass(badgeOf(f.file))}`, "data-key": String(f.key), title: f.file.name },
      f.preview ? h("img", { class: "attach-preview", src: f.preview, alt: "" }) : h("span", { class: "kind-badge", "aria-hidden": "true", text: badgeOf(f.file) }),
      h("span", { class: "attach-name", text: f.file.name }),
      h("span", { class: "attach-size muted", text: fileSize(f.file.size) }),
      h("button", { type: "button", class: "attach-remove", "aria-label": `Remove ${f.file.name}`, text: "×",
        onclick: () => removeFile(f.key) }))));
    list.hidden = !state.files.length;
    // A message may be empty when it carries a file.
    $("message").required = !state.files.length;
  }

  // Dragging files over the transcript or the composer highlights the conversation; dropping
  // them adds them. A drop anywhere else on the page is swallowed: the browser would leave
  // the page to show the file, and the typed message with it.
  function wireDrops() {
    const zone = document.querySelector(".conversation");
    const hasFiles = (e) => e.dataTransfer && Array.from(e.dataTransfer.types || []).includes("Files");
    let depth = 0;
    const show = (on) => { zone.classList.toggle("dropping", on); $("drop-hint").hidden = !on; };
    zone.addEventListener("dragenter", (e) => { if (!hasFiles(e)) return; e.preventDefault(); depth += 1; show(true); });
    zone.addEventListener("dragover", (e) => { if (!hasFiles(e)) return; e.preventDefault(); e.dataTransfer.dropEffect = "copy"; });
    zone.addEventListener("dragleave", (e) => { if (!hasFiles(e)) return; depth = Math.max(0, depth - 1); if (!depth) show(false); });
    zone.addEventListener("drop", (e) => {
      depth = 0;
      show(false);
      if (!e.dataTransfer || !e.dataTransfer.files.length) return;
      e.preventDefault();
      addFiles(Array.from(e.dataTransfer.files));
      $("message").focus();
    });
    for (const kind of ["dragover", "drop"]) {
      window.addEventListener(kind, (e) => { if (hasFiles(e) && !zone.contains(e.target)) e.preventDefault(); });
    }
  }

  // A message's files, fetched with the page's credential (an <img src> or a plain link
  // cannot send it) and kept as blob: URLs.
  const fileBlobs = new Map();
  function forgetFileBlobs() {  // the transcript is drawn afresh: its images with it
    for (const got of fileBlobs.values()) got.then((url) => URL.revokeObjectURL(url), () => {});
    fileBlobs.clear();
  }

  function chatFileUrl(id) {
    if (!fileBlobs.has(id)) {
      const got = NL.authFetch(`/api/v1/chat/attachments/${encodeURIComponent(id)}`).then(async (res) => {
        if (!res.ok) throw new NL.ApiError(`the file is not available (${res.status})`, res.status);
        return URL.createObjectURL(await res.blob());
      });
      got.catch(() => fileBlobs.delete(id));  // a later click tries again
      fileBlobs.set(id, got);
    }
    return fileBlobs.get(id);
  }

  // Extraction statuses that leave the model without the file's text (a scan, a damaged or
  // too costly file): a model that reads whole PDFs gets a PDF itself, others are told so.
  const NOT_READABLE = {
    failed: "Its text could not be read: a model that reads whole PDFs gets the file itself, others are told so.",
    no_text: "It has no text layer (a scan?): a model that reads whole PDFs gets the file itself, others are told so.",
  };

  function messageFiles(files) {
    const list = h("ul", { class: "msg-files", "aria-label": "Attached files" });
    for (const f of files) {
      const href = `/api/v1/chat/attachments/${encodeURIComponent(f.id)}`;
      const li = h("li", { class: `msg-file ${f.kind}`, "data-attachment-id": f.id, "data-kind": f.kind });
      if (f.kind === "image") {
        const img = h("img", { class: "msg-thumb", alt: f.name });
        chatFileUrl(f.id).then((url) => { img.src = url; }, () => { img.alt = `${f.name} (unavailable)`; li.classList.add("missing"); });
        li.append(h("a", { class: "thumb-link", href, title: `Open ${f.name} (${fileSize(f.size)})`,
          onclick: (e) => openFile(e, f, false) }, img));
      } else {
        li.append(
          h("span", { class: "kind-badge", "aria-hidden": "true", text: KIND_LABELS[f.kind] || "File" }),
          h("a", { class: "file-link", href, title: `Download ${f.name}`, onclick: (e) => openFile(e, f, true) }, f.name),
          h("span", { class: "muted", title: f.mime, text: fileSize(f.size) }));
        if (NOT_READABLE[f.status]) {
          li.append(h("span", { class: "not-readable", title: NOT_READABLE[f.status], text: "text not readable" }));
        }
      }
      list.append(li);
    }
    return list;
  }

  // An image opens in a new tab, any other file downloads under its own name.
  async function openFile(e, f, download) {
    e.preventDefault();
    try {
      const url = await chatFileUrl(f.id);
      if (!download) { window.open(url, "_blank", "noopener"); return; }
      const a = h("a", { href: url, download: f.name, hidden: true });
      document.body.append(a);
      a.click();
      a.remove();
    } catch (err) {
      if (err.status !== 401) announce(`“${f.name}”: ${err.message}`);
    }
  }

  // -- sending and streaming ------------------------------------------------------------------

  function noteContext() {
    if (!state.note || !state.attach) return undefined;
    const ta = $("note-body");
    const ctx = { note_id: state.note.id };
    if (ta.selectionEnd > ta.selectionStart) {
      ctx.selection = { start: codePoints(ta.value, ta.selectionStart), end: codePoints(ta.value, ta.selectionEnd) };
    }
    return ctx;
  }

  // The JSON body as the page sends it, or with files `multipart/form-data` with that body as
  // the `payload` field and each file as an `attachments` part.
  async function postSend(body, files) {
    if (!files.length) return api("POST", "/api/v1/chat/send", body);
    const form = new FormData();
    form.append("payload", JSON.stringify(body));
    for (const f of files) form.append("attachments", f, f.name);
    let res;
    try {
      res = await NL.authFetch("/api/v1/chat/send", { method: "POST", body: form });
    } catch (err) {
      if (err instanceof NL.ApiError) throw err;
      throw new Error(`the upload did not reach the server (${err.message}); try again`);
    }
    const data = await res.json().catch(() => ({}));
    if (!res.ok) {
      const detail = typeof data.detail === "string" ? data.detail : null;
      throw new NL.ApiError(data.message || detail || `${res.status} ${res.statusText}`, res.status, data);
    }
    return data;
  }

  // `withFiles`: the composer's chips go with the message (a retry sends the text alone).
  async function sendMessage(text, withFiles = false) {
    text = text.trim();
    const files = withFiles ? state.files.map((f) => f.file) : [];
    if ((!text && !files.length) || state.run || state.sending) return;
    state.sending = true;
    if (files.length) announce(`Sending ${files.length} file${files.length > 1 ? "s" : ""}…`);
    try {
      if (state.note && state.dirty && state.attach) await saveNote();
      const body = { message: text, note_context: noteContext() };
      if (state.conv) body.conversation_id = state.conv.id;
      else {
        if (Object.keys(state.pendingControls).length) body.controls = state.pendingControls;
        if (state.pendingLevel !== "standard") body.security_level = state.pendingLevel;
      }
      const res = await postSend(body, files);
      // Kept for the answer's drawing: a turn that settles before the page follows its
      // events would not show it otherwise.
      if (res.privacy_warning) state.warnings[res.message_id] = res.privacy_warning;
      $("message").value = "";
      if (files.length) clearFiles();
      state.pendingControls = {};
      state.pendingLevel = "standard";
      if (!state.conv || state.conv.id !== res.conversation_id) {
        await openConversation(res.conversation_id);
      } else {
        if (res.user_message_id) {
          upsertMessage(files.length ? await api("GET", `/api/v1/chat/messages/${res.user_message_id}`)
            : { id: res.user_message_id, role: "user", content: text, status: "complete" });
        }
        if (res.status === "running") {
          upsertMessage({ id: res.message_id, role: "assistant", status: "running", partial_text: "", tool_calls: [], edits: [] });
        } else {
          upsertMessage(await api("GET", `/api/v1/chat/messages/${res.message_id}`));
          state.conv = await api("GET", `/api/v1/chat/conversations/${res.conversation_id}`);
          showHeader();
        }
        $("empty-hint").hidden = true;
        if (res.status === "running") startStream(res.message_id, 0);
      }  // (opening a new conversation attaches to its running turn itself)
      scrollDown();
    } catch (err) {
      if (files.length) announce("");
      // The text and the chips stay: unlocking (or setting up the vault) sends them.
      const again = () => sendMessage(text, withFiles);
      if (isLocked(err)) askUnlock("This chat is protected: unlock your vault to send your message.", again);
      else if (needsVault(err)) askUnlock("A private or fortress chat is sealed to your vault: set it up to send.", again);
      else showComposerError(err.message);
    } finally {
      state.sending = false;
    }
  }

  function showComposerError(text) {
    const li = h("li", { class: "msg note" }, h("div", { class: "card error", role: "alert" },
      h("h3", { text: "Not sent" }), h("p", { text })));
    $("transcript").append(li);
    scrollDown();
  }

  // `replayTools`: the message was just drawn from a running turn's view, which holds its text
  // so far but not the tool calls made since it was stored: read the turn's events from its
  // first and, up to `afterSeq`, draw only those calls and their results.
  function startStream(messageId, afterSeq, activity, replayTools) {
    stopStream();
    const abort = new AbortController();
    const es = { close: () => abort.abort() };
    const from = replayTools ? 0 : afterSeq;
    const run = { id: messageId, es, lastSeq: from, replayUntil: replayTools ? afterSeq : 0, started: Date.now(),
      activity: activity || "Starting…", tokens: 0 };
    state.run = run;
    setRunning(true);
    const url = `/api/v1/chat/messages/${messageId}/events?after_seq=${from}`;
    readEvents(url, abort.signal, (kind, ev) => { if (EVENT_KINDS.includes(kind)) onEvent(run, kind, ev); })
      .catch((err) => err)
      .then((err) => {
        if (state.run !== run || abort.signal.aborted) return;
        if (err && err.status === 401) { stopStream(); return; }  // the sign-in form is showing
        if (isLocked(err)) { lockedMeanwhile(); return; }
        // The stream ended before "done", or the connection dropped: pick up after the last event seen.
        setTimeout(() => resume(run), 400);
      });
    state.tick = setInterval(() => showActivity(run), 1000);
    showActivity(run);
  }

  async function resume(run) {
    if (state.run !== run) return;
    try {
      const m = await api("GET", `/api/v1/chat/messages/${run.id}`);
      if (state.run !== run) return;  // stopped or replaced meanwhile
      if (m.status === "running") {
        upsertMessage(m);  // the text so far, then what follows it
        startStream(run.id, m.last_seq, m.activity, true);
      } else {
        finish(run);
      }
    } catch (err) {
      if (state.run !== run) return;
      if (err.status === 401) { stopStream(); return; }
      if (isLocked(err)) { lockedMeanwhile(); return; }
      announce(`Lost the connection: ${err.message}`);
      setTimeout(() => resume(run), 2000);
    }
  }

  // No turn is followed, and the button says so: it shows Cancel only while there is a run to cancel.
  function stopStream() {
    if (state.run) state.run.es.close();
    clearInterval(state.tick);
    $("run-clock").textContent = "";
    state.run = null;
    setRunning(false);
  }

  // The activity is announced when it changes; the seconds and tokens tick beside it in an
  // element screen readers skip (a live region rewritten every second is read every second).
  function showActivity(run) {
    if (state.run !== run) return;
    if (run.announced !== run.activity) {
      run.announced = run.activity;
      announce(run.activity);
    }
    const secs = Math.round((Date.now() - run.started) / 1000);
    $("run-clock").textContent = `${secs}s` + (run.tokens ? ` · ${run.tokens} tokens out` : "");
  }

  function liveBubble(messageId) {
    const li = $(`msg-${messageId}`) || upsertMessage({ id: messageId, role: "assistant", status: "running", partial_text: "", tool_calls: [], edits: [] });
    const all = li.querySelectorAll(".bubble.streaming");
    return { li, bubble: all[all.length - 1] };
  }

  function onEvent(run, kind, ev) {
    const seq = Number(ev.lastEventId);
    if (state.run !== run || !(seq > run.lastSeq)) return;  // a repeat after a reconnect
    run.lastSeq = seq;
    // In the view already (the tool lines and the privacy notice are drawn once, whenever they come).
    if (seq <= run.replayUntil && !["tool_call", "tool_result", "privacy_warning"].includes(kind)) return;
    const data = JSON.parse(ev.data);
    const { li, bubble } = liveBubble(run.id);
    if (kind === "privacy_warning") {
      // The model is not private and the chat holds private content: said before the answer.
      state.warnings[run.id] = data.message;
      if (li.querySelector(".privacy-warning")) return;
      li.querySelector(".who").after(privacyCard(data.message));
      announce(data.message);
      scrollDown();
    } else if (kind === "text" && bubble) {
      paintStreaming(bubble, (streamed.get(bubble) || "") + data.text);
      scrollDown();
    } else if (kind === "thinking") {
      let box = li.querySelector(".thinking .thinking-text");
      if (!box) {
        li.querySelector(".who").after(thinkingBox(""));
        box = li.querySelector(".thinking .thinking-text");
      }
      box.append(data.text);
    } else if (kind === "activity") {
      run.activity = data.label;
      showActivity(run);
    } else if (kind === "tool_call") {
      NoteloomTools.addCall(li, data, (d) => li.querySelector(".who").after(d));
    } else if (kind === "tool_result") {
      NoteloomTools.settleCall(li, data);
    } else if (kind === "edit") {
      li.append(editCard(data));
      scrollDown();
    } else if (kind === "usage") {
      run.tokens = data.run_usage.output_tokens;
      showActivity(run);
    } else if (kind === "done") {
      run.es.close();
      finish(run, data);
    }
  }

  // The followed turn ended. A run no longer followed (replaced by a newer drawing of the
  // chat, which follows the turn itself) ends nothing; nor does a reply that comes after
  // another transcript was drawn.
  async function finish(run, done) {
    if (state.run !== run) return;
    stopStream();
    const view = state.view;
    try {
      const m = await api("GET", `/api/v1/chat/messages/${run.id}`);
      if (state.view !== view) return;
      upsertMessage(m);
      if (m.status === "running") {  // an earlier run's end, replayed: this one goes on
        if (!state.run) startStream(run.id, m.last_seq, m.activity, true);
        return;
      }
      if (state.conv) {
        const conv = await api("GET", `/api/v1/chat/conversations/${state.conv.id}`);
        if (state.view !== view) return;
        state.conv = conv;
        showHeader();
      }
      loadConversations();
      loadNotes();  // tools may have created, changed or trashed notes
      if (state.note && !state.dirty) {
        try { showNote(await api("GET", `/api/v1/notes/${state.note.id}`)); } catch { /* trashed: keep the text */ }
      }
    } catch (err) {
      if (state.view !== view) return;
      if (isLocked(err)) { lockedMeanwhile(); return; }
      announce(err.message);
    }
    const status = done ? done.status : "settled";
    announce({ complete: "Answer complete.", cancelled: "Cancelled.", failed: "The answer failed.",
      awaiting_confirmation: "Waiting for your approval." }[status] || "");
    scrollDown();
  }

  function setRunning(on) {
    const send = $("send");
    send.textContent = on ? "Cancel" : "Send";
    send.classList.toggle("cancel", on);
    send.type = on ? "button" : "submit";
    send.setAttribute("aria-label", on ? "Cancel the running answer" : "Send the message");
    if (!on) announce("");
  }

  async function cancelRun() {
    const run = state.run;
    if (!run) return;
    run.activity = "Cancelling…";
    showActivity(run);
    try {
      const res = await api("POST", `/api/v1/chat/messages/${run.id}/cancel`);
      if (res.already_settled) finish(run);  // (a run replaced meanwhile: its successor sees the end)
    } catch (err) {
      announce(err.message);
    }
  }

  // -- settings and export ------------------------------------------------------------------

  const CAPABILITY_BOXES = [["set-memory", "memory_access"], ["set-history", "history_access"],
    ["set-data", "data_access"], ["set-web", "web_access"]];

  // A capability left to its default stays so (null) unless the box now says otherwise: a chat
  // keeps following the workspace's memory default until someone chooses for it.
  function capabilityChoices() {
    const c = (state.conv ? state.conv.controls : state.pendingControls) || {};
    const caps = (state.models && state.models.capabilities) || {};
    const out = {};
    for (const [id, key] of CAPABILITY_BOXES) {
      if ($(id).disabled) continue;
      const v = $(id).checked;
      out[key] = (c[key] ?? null) === null && v === (caps[key] ?? false) ? null : v;
    }
    return out;
  }

  // As a capability box: a chat that never chose keeps following the default (text only),
  // and says nothing of it.
  function attachmentModeChoice() {
    const c = (state.conv ? state.conv.controls : state.pendingControls) || {};
    const v = $("set-attachment-mode").value;
    return (c.attachment_mode ?? null) === null && v === "extract" ? {} : { attachment_mode: v };
  }

  // `focus`: "level" focuses the security level chosen; else the model picker takes it.
  async function openSettings(focus) {
    if (state.conv && state.conv.locked) return;
    const drawer = $("settings");
    if (!state.models) state.models = await api("GET", "/api/v1/chat/models");
    const c = state.conv ? state.conv.controls : { workspace_tools: true, workspace_writes: true, ...state.pendingControls };
    const level = state.conv ? state.conv.security_level || "standard" : state.pendingLevel;
    for (const r of levelRadios()) r.checked = r.value === level;
    const fortressWhy = privateModels().length ? "" : "no private model is configured (a server of your own, or one marked private = true)";
    const fortress = document.querySelector('input[name="set-level"][value="fortress"]');
    fortress.disabled = Boolean(fortressWhy) && level !== "fortress";
    fortress.title = fortressWhy;
    state.drawerModel = c.model || "";
    fillModels(level, state.drawerModel);
    $("set-temperature").value = c.temperature ?? "";
    $("set-top-p").value = c.top_p ?? "";
    $("set-max-tokens").value = c.max_tokens ?? "";
    $("set-thinking").value = c.thinking_level || "";
    $("set-instructions").value = c.instructions || "";
    $("set-tools").checked = c.workspace_tools !== false;
    $("set-writes").checked = c.workspace_writes !== false;
    const caps = state.models.capabilities || {};
    for (const [id, key] of CAPABILITY_BOXES) $(id).checked = c[key] ?? caps[key] ?? false;
    const webWhy = (state.models.unavailable || {}).web_access;
    $("set-web").disabled = Boolean(webWhy);
    $("set-web-note").textContent = webWhy ? `(${webWhy})` : "";
    $("set-attachment-mode").value = c.attachment_mode || "extract";
    showModelReads();
    showLevelNote();
    $("settings-error").hidden = true;
    drawer.hidden = false;
    $("settings-open").setAttribute("aria-expanded", "true");
    $("level-open").setAttribute("aria-expanded", "true");
    (focus === "level" ? document.querySelector('input[name="set-level"]:checked') : $("set-model")).focus();
  }

  const levelRadios = () => document.querySelectorAll('input[name="set-level"]');
  const chosenLevel = () => document.querySelector('input[name="set-level"]:checked')?.value || "standard";
  const modelEntry = (id) => ((state.models && state.models.models) || []).find((m) => m.id === id);
  const NO_MODEL = "-";  // the fortress picker's "choose a private model", until one is chosen
  const privateModels = () => ((state.models && state.models.models) || []).filter((m) => m.private);

  // Whether the model chosen in the drawer ("" = the default) is private.
  function choiceIsPrivate(id) {
    const entry = modelEntry(id || (state.models && state.models.default_model));
    return Boolean(entry && entry.private);
  }

  // The model picker for `level`: a fortress chat is offered private models only, and when
  // the chosen one is not private the picker asks for one instead of keeping it.
  function fillModels(level, chosen) {
    const select = $("set-model");
    const fortress = level === "fortress";
    const ask = fortress && !choiceIsPrivate(chosen);
    const def = state.models.default_model;
    select.replaceChildren();
    if (ask) select.append(h("option", { value: NO_MODEL, disabled: true, text: "Choose a private model" }));
    if (!fortress || choiceIsPrivate("")) select.append(h("option", { value: "", text: `Default (${def || "none configured"})` }));
    const ids = new Set();
    // One group per configured provider, private ones marked; one that cannot be used is shown
    // with its reason and its models disabled (a fortress chat lists private models only).
    const groups = new Map();
    const groupOf = (name, label) => {
      if (!groups.has(name)) { const g = h("optgroup", { label }); groups.set(name, g); select.append(g); }
      return groups.get(name);
    };
    const providers = state.models.providers || [];
    const privateOf = new Map(providers.map((p) => [p.name, p.private]));
    const label = (p) => `${p.name}${p.private ? " · private" : ""}`;
    for (const m of state.models.models) {
      if (fortress && !m.private) continue;
      ids.add(m.id);
      const group = groupOf(m.provider, label({ name: m.provider, private: privateOf.has(m.provider) ? privateOf.get(m.provider) : m.private }));
      group.append(h("option", { value: m.id, text: m.id + (m.private ? " (private)" : ""), "data-private": String(Boolean(m.private)) }));
    }
    for (const p of providers) {
      if (p.ready || (fortress && !p.private)) continue;
      const group = groupOf(p.name, `${label(p)} · not available: ${p.problem || "not configured"}`);
      for (const id of p.models.length ? p.models : [`${p.name}:…`]) {
        group.append(h("option", { value: `unavailable:${id}`, disabled: true, text: id + (p.private ? " (private)" : "") }));
      }
    }
    if (chosen && !ids.has(chosen) && !fortress) select.append(h("option", { value: chosen, text: chosen }));
    select.value = ask ? NO_MODEL : chosen;
    select.setAttribute("aria-invalid", String(ask));
  }

  // What the level chosen in the drawer means for this chat, said before it is saved.
  function showLevelNote() {
    const level = chosenLevel();
    const current = state.conv ? state.conv.security_level || "standard" : state.pendingLevel;
    const v = NL.vault.status();
    const model = $("set-model").value || (state.models && state.models.default_model) || "the default model";
    const note = $("set-level-note");
    let text = "";
    let warn = false;
    if (level !== "standard" && v && !v.exists) {
      text = "You have no vault yet: saving asks you to set up its passphrase first.";
    } else if (level === "fortress" && !choiceIsPrivate($("set-model").value)) {
      text = "A fortress chat runs on private models only: choose one under Model.";
      warn = true;
    } else if (level === "private" && !choiceIsPrivate($("set-model").value)) {
      text = `${model} is not a private model: what it reads of this chat goes to its provider (it stays sealed here). `
        + "Pick a private model, or make the chat fortress.";
      warn = true;
    } else if (level === "standard" && current !== "standard" && state.conv) {
      text = "Lowering to standard opens what is sealed and stores it as it is" + (v && !v.unlocked ? ": it asks to unlock your vault." : ".");
    } else if (level === "fortress") {
      text = "Only private models are offered.";
    }
    note.textContent = text;
    note.hidden = !text;
    note.classList.toggle("privacy-warning", warn);
  }

  // What the model chosen in the drawer reads of an attached file, from its declared
  // capabilities (the server refuses at upload what it cannot take).
  function showModelReads() {
    const id = $("set-model").value || (state.models && state.models.default_model);
    const entry = ((state.models && state.models.models) || []).find((m) => m.id === id);
    const caps = (entry && entry.capabilities) || {};
    const takes = [caps.vision ? "images" : null, caps.document ? "whole PDFs" : null].filter(Boolean);
    $("set-attachment-note").textContent = !entry || !entry.capabilities ? ""
      : takes.length ? `This model also takes ${takes.join(" and ")}.`
      : "This model reads text only: images are refused, PDFs go as their text.";
  }

  function closeSettings() {
    $("settings").hidden = true;
    $("settings-open").setAttribute("aria-expanded", "false");
    $("level-open").setAttribute("aria-expanded", "false");
    $("settings-open").focus();
  }

  function settingsError(text, focus) {
    const box = $("settings-error");
    box.textContent = text;
    box.hidden = false;
    if (focus) focus.focus();
  }

  async function saveSettings(e) {
    if (e) e.preventDefault();
    const level = chosenLevel();
    const current = state.conv ? state.conv.security_level || "standard" : state.pendingLevel;
    if (level === "fortress" && !choiceIsPrivate($("set-model").value)) {
      settingsError("A fortress chat runs on private models only: choose a private model under Model, then save.", $("set-model"));
      return;
    }
    if (level !== "standard" && level !== current && noVault()) {
      askUnlock(`A ${LEVELS[level].toLowerCase()} chat is sealed to your vault: set it up, then the settings are saved.`, saveSettings);
      return;
    }
    const num = (id) => ($(id).value === "" ? null : Number($(id).value));
    const controls = {
      model: $("set-model").value || null,
      temperature: num("set-temperature"),
      top_p: num("set-top-p"),
      max_tokens: num("set-max-tokens"),
      thinking_level: $("set-thinking").value || null,
      instructions: $("set-instructions").value.trim() || null,
      workspace_tools: $("set-tools").checked,
      workspace_writes: $("set-writes").checked,
      ...capabilityChoices(),
      ...attachmentModeChoice(),
    };
    try {
      if (state.conv) {
        const body = { controls };
        if (level !== current) body.security_level = level;  // with the model: fortress takes both at once
        await patchConversation(state.conv.id, body);
      } else {
        state.pendingControls = controls;
        state.pendingLevel = level;
        showHeader();
      }
      if (!$("settings").hidden) closeSettings();
    } catch (err) {
      if (isLocked(err)) { askUnlock("Lowering the level opens what is sealed: unlock your vault to do it.", saveSettings); return; }
      if (needsVault(err)) { askUnlock("A protected chat is sealed to your vault: set it up, then the settings are saved.", saveSettings); return; }
      // 422 naming the model (not private, for a fortress chat), 409 (a turn is running): said here.
      const field = err.data && err.data.field;
      settingsError(err.message, field === "model" ? $("set-model") : null);
    }
  }

  function exportFormat() {
    return document.querySelector('input[name="export-format"]:checked').value;
  }

  async function openExport() {
    if (!state.conv || state.conv.locked) return;
    const dialog = $("export-dialog");
    if (!dialog.open) dialog.showModal();
    try {
      await loadExport();
    } catch (err) {
      if (!isLocked(err)) throw err;
      dialog.close();
      askUnlock("This chat is protected: unlock your vault to export it.", openExport);
    }
  }

  async function loadExport() {
    const fmt = exportFormat();
    const url = `/api/v1/chat/conversations/${state.conv.id}/export?format=${fmt}`;
    const res = await NL.authFetch(url);
    const text = await res.text();
    if (!res.ok) throw new NL.ApiError(`the export failed (${res.status})`, res.status);
    $("export-text").value = text;
    // A plain link to the export would carry no credential: download what was fetched,
    // under the name the server gives it.
    const named = /filename="([^"]+)"/.exec(res.headers.get("content-disposition") || "");
    const link = $("export-download");
    if (link.href.startsWith("blob:")) URL.revokeObjectURL(link.href);
    link.href = URL.createObjectURL(new Blob([text], { type: res.headers.get("content-type") || "text/plain" }));
    link.setAttribute("download", named ? named[1] : `chat.${fmt}`);
    $("export-status").textContent = "";
  }

  async function copyExport() {
    const text = $("export-text").value;
    try {
      await navigator.clipboard.writeText(text);
    } catch {
      $("export-text").select();
      document.execCommand("copy");
    }
    $("export-status").textContent = "Copied.";
  }

  // -- the vault (vault.js) ---------------------------------------------------------------

  const askUnlock = (reason, then) => NL.vault.ask(reason, then);

  // Unlocked (or set up): the chat shown as locked opens; `then` of askUnlock runs after.
  async function vaultOpened() {
    const v = NL.vault.status();
    announce(v && v.expires_time ? `Vault unlocked until ${NL.vault.clock(v.expires_time)}.` : "Vault unlocked.");
    if (state.conv && state.conv.locked) {
      if (await openConversation(state.conv.id)) $("message").focus();  // to go on with it
    } else {
      await loadConversations();
    }
  }

  async function vaultLocked() {
    if (state.conv && state.conv.protected) showLocked(state.conv);
    await loadConversations();
    announce("Vault locked: protected chats stay sealed until you unlock it.");
  }

  // A request of the open chat met a closed window (it expired, or another tab locked it).
  function lockedMeanwhile() {
    if (state.conv) showLocked(state.conv);
    setRunning(false);
    NL.vault.load();
    loadConversations();
    announce("Your vault is locked: unlock it to go on with this chat.");
  }

  // -- the notes pane -----------------------------------------------------------------------

  async function loadNotes() {
    const q = $("note-search").value.trim();
    const list = $("note-list");
    try {
      const data = await api("GET", "/api/v1/notes?limit=30" + (q ? `&q=${encodeURIComponent(q)}` : ""));
      list.replaceChildren();
      for (const n of data.notes) {
        list.append(h("li", {}, h("button", { type: "button", "aria-current": state.note && state.note.id === n.id ? "true" : null,
          onclick: () => openNote(n.id) }, n.title || "(untitled)", n.snippet ? h("span", { class: "snippet", text: n.snippet }) : null)));
      }
      if (!data.notes.length) list.append(h("li", { class: "muted", text: q ? "No notes match." : "No notes yet." }));
    } catch (err) {
      list.replaceChildren(h("li", { class: "form-error", text: err.message }));
    }
  }

  async function openNote(id) {
    if (state.dirty && state.note && state.note.id !== id) await saveNote();
    showNote(await api("GET", `/api/v1/notes/${id}`));
    state.attach = true;
    updateContext();
    loadNotes();
  }

  function showNote(note) {
    // A copy fetched before a newer save (an accepted edit, an undo) may arrive after it.
    if (state.note && state.note.id === note.id && note.updated_time < state.note.updated_time) return;
    state.note = note;
    state.dirty = false;
    $("editor").hidden = false;
    $("note-title").value = note.title;
    $("note-body").value = note.body;
    $("note-status").textContent = "";
    $("history").hidden = true;
    $("note-history").setAttribute("aria-expanded", "false");
    if ($("tab-preview").getAttribute("aria-selected") === "true") renderPreview();
    updateContext();
  }

  async function saveNote() {
    if (!state.note) return;
    try {
      const note = await api("PATCH", `/api/v1/notes/${state.note.id}`, {
        title: $("note-title").value.trim() || "Untitled",
        body: $("note-body").value,
        base_updated_time: state.note.updated_time,
      });
      const sel = [$("note-body").selectionStart, $("note-body").selectionEnd];
      state.note = note;
      state.dirty = false;
      $("note-body").setSelectionRange(sel[0], sel[1]);
      $("note-status").textContent = "Saved.";
      loadNotes();
    } catch (err) {
      $("note-status").textContent = err.message;
      throw err;
    }
  }

  async function newNote() {
    const note = await api("POST", "/api/v1/notes", { title: "Untitled", body: "" });
    await openNote(note.id);
    $("note-title").select();
    $("note-title").focus();
  }

  async function renderPreview() {
    const data = await api("POST", "/api/v1/notes/preview", { markdown: $("note-body").value });
    NL.setHtml($("note-preview"), data.html);  // sanitised by the server
  }

  function selectTab(preview) {
    $("tab-edit").setAttribute("aria-selected", String(!preview));
    $("tab-preview").setAttribute("aria-selected", String(preview));
    $("note-body").hidden = preview;
    $("note-preview").hidden = !preview;
    if (preview) renderPreview();
  }

  async function toggleHistory() {
    const box = $("history");
    if (!box.hidden) {
      box.hidden = true;
      $("note-history").setAttribute("aria-expanded", "false");
      return;
    }
    const data = await api("GET", `/api/v1/notes/${state.note.id}/revisions`);
    box.replaceChildren();
    for (const r of data.revisions.slice(0, 20)) {
      const when = NL.when(r.version_time) === "invalid date" ? "invalid date" : new Date(r.version_time).toLocaleString();
      box.append(h("li", {}, h("span", { text: `${when} · ${r.chars} characters` }),
        h("button", { type: "button", text: "Restore", onclick: async () => {
          showNote(await api("POST", `/api/v1/notes/${state.note.id}/revisions/${r.id}/restore`));
          $("note-status").textContent = "Earlier version restored.";
        } })));
    }
    if (!data.revisions.length) box.append(h("li", { class: "muted", text: "No earlier versions." }));
    box.hidden = false;
    $("note-history").setAttribute("aria-expanded", "true");
  }

  function updateContext() {
    const chip = $("context-chip");
    if (!state.note || !state.attach) { chip.hidden = true; return; }
    const ta = $("note-body");
    const n = ta.selectionEnd - ta.selectionStart;
    $("context-text").textContent = `Note: ${state.note.title || "(untitled)"}` + (n > 0 ? ` · selection of ${codePoints(ta.value.slice(ta.selectionStart), n)} characters` : "");
    chip.hidden = false;
  }

  // -- wiring -------------------------------------------------------------------------------

  function wire() {
    $("composer").addEventListener("submit", (e) => { e.preventDefault(); sendMessage($("message").value, true); });
    $("send").addEventListener("click", (e) => { if (state.run) { e.preventDefault(); cancelRun(); } });
    $("message").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); if (!state.run) sendMessage($("message").value, true); }
      if (e.key === "Escape" && state.run) { e.preventDefault(); cancelRun(); }
    });
    $("new-chat").addEventListener("click", () => { if (state.trash) toggleTrash(); newChat(); });
    $("trash-open").addEventListener("click", toggleTrash);
    $("attach-open").addEventListener("click", () => $("attach-input").click());
    $("attach-input").addEventListener("change", (e) => {
      addFiles(Array.from(e.target.files));
      e.target.value = "";  // choosing the same file again still fires "change"
      $("message").focus();
    });
    $("message").addEventListener("paste", (e) => {
      const pasted = e.clipboardData ? Array.from(e.clipboardData.files) : [];
      if (pasted.length) { e.preventDefault(); addFiles(pasted); }
    });
    wireDrops();
    $("thread-search").addEventListener("input", () => {
      clearTimeout(state.searchTimer);
      state.searchTimer = setTimeout(loadConversations, 250);
    });
    $("settings-open").addEventListener("click", () => ($("settings").hidden ? openSettings() : closeSettings()));
    $("level-open").addEventListener("click", () => openSettings("level"));
    $("settings-close").addEventListener("click", closeSettings);
    $("settings-form").addEventListener("submit", saveSettings);
    $("set-model").addEventListener("change", () => {
      state.drawerModel = $("set-model").value;
      showModelReads();
      showLevelNote();
      $("set-model").setAttribute("aria-invalid", String(chosenLevel() === "fortress" && !choiceIsPrivate($("set-model").value)));
    });
    for (const r of levelRadios()) {
      r.addEventListener("change", () => { fillModels(chosenLevel(), state.drawerModel); showModelReads(); showLevelNote(); });
    }
    $("locked-unlock").addEventListener("click", () => askUnlock("This chat is protected: unlock your vault to open it."));
    NL.vault.on("opened", vaultOpened);
    NL.vault.on("locked", vaultLocked);
    $("settings").addEventListener("keydown", (e) => { if (e.key === "Escape") closeSettings(); });
    $("export-open").addEventListener("click", openExport);
    for (const r of document.querySelectorAll('input[name="export-format"]')) r.addEventListener("change", loadExport);
    $("export-copy").addEventListener("click", copyExport);
    $("note-search").addEventListener("input", () => {
      clearTimeout(state.noteTimer);
      state.noteTimer = setTimeout(loadNotes, 250);
    });
    $("note-new").addEventListener("click", newNote);
    $("note-save").addEventListener("click", () => saveNote().catch(() => {}));
    $("note-history").addEventListener("click", toggleHistory);
    $("tab-edit").addEventListener("click", () => selectTab(false));
    $("tab-preview").addEventListener("click", () => selectTab(true));
    for (const id of ["note-title", "note-body"]) {
      $(id).addEventListener("input", () => { state.dirty = true; $("note-status").textContent = "Unsaved changes"; });
    }
    for (const ev of ["select", "keyup", "mouseup", "focus"]) $("note-body").addEventListener(ev, updateContext);
    $("note-body").addEventListener("keydown", (e) => {
      if ((e.ctrlKey || e.metaKey) && e.key === "s") { e.preventDefault(); saveNote().catch(() => {}); }
    });
    $("context-clear").addEventListener("click", () => { state.attach = false; updateContext(); $("message").focus(); });
    // Links to notes in answers ([title](:/ID)) open the note here instead of downloading.
    $("transcript").addEventListener("click", async (e) => {
      const a = e.target.closest("a[href^='/attachments/']");
      if (!a) return;
      e.preventDefault();
      const id = a.getAttribute("href").split("/").pop();
      try { await openNote(id); } catch { window.open(await NL.attachmentUrl(id), "_blank", "noopener"); }
    });
  }

  NL.start(async () => {
    wire();
    setRunning(false);
    await Promise.all([NL.vault.init(), loadConversations(), loadNotes()]);
    const params = new URLSearchParams(location.search);
    const opened = idFromPath() || params.get("c");
    if (opened) await openConversation(opened, "replace");
    window.addEventListener("popstate", () => {
      if (!location.pathname.startsWith("/chat")) return;
      const id = idFromPath();
      if (id && (!state.conv || state.conv.id !== id)) openConversation(id, "none");
      else if (!id && state.conv) newChat("none");
    });
    if (params.get("note")) await openNote(params.get("note"));
  });
})();
