// The note editor pane: title, the CodeMirror body (window.NoteloomEditor), autosave with a
// visible state, conflicts shown side by side, preview, to-do fields, tags, attachments,
// history with a diff and restore, the trash and back.
//
//   NoteEditor.open(container, noteId, {onSaved(note), onTitle(title), onTrashed(), onMissing(),
//                   onSelection({from, to, head, text}), section}) -> Promise<handle | null>
//   handle: {flush(): Promise (rejects while text stays unsaved), dirty(): boolean, close(),
//            editor (the NoteloomEditor handle), noteId, note(), proposeEdits(edits, {onDecision}),
//            adopt(note), scrollToSection(section) (alias showSection, what app.js calls)}
//   NoteEditor.current: the handle of the pane open now (null when none).
//
// Saving: ~1 s after the last change, when the editor loses focus, on flush, and at once on
// Ctrl+S; each save is a PATCH with base_updated_time, so a note changed elsewhere meanwhile
// answers 409 and both versions are shown (Keep mine / Take theirs), never overwritten.
// Unsaved text also survives leaving the page: a draft in sessionStorage is offered back when
// the note opens again. Text goes in with textContent; rendered HTML comes from the
// renderer (sanitised) or the server's preview.
//
// Under the title: when the note was made and changed, the to-do's due date, and its source
// as a link only when the server sends one (source_url: http, https or mailto, else null).
// Under the text: "Linked from", the notes linking here (read each time the note opens). The
// preview follows the text a moment after it stops changing, not at every change.
"use strict";

(() => {
  const h = (...a) => NL.h(...a);
  const SAVE_DELAY = 1000;
  // The preview follows typing this long after the last keystroke (one render per pause,
  // not one per key: a long note takes a while to render).
  const PREVIEW_DELAY = 300;
  // A task item's box, as the server finds it (web/render.py): in a list item, in quotes too.
  const TASK = /^((?:[ \t]*>)*[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+\[)([ xX])(\])/;
  const LINK_SCHEMES = /^(https?|mailto):/i;
  const STATUS = { saved: "Saved", saving: "Saving…", dirty: "Unsaved changes", conflict: "Conflict" };
  const draftKey = (id) => `noteloom.draft.${id}`;
  let current = null;

  function readDraft(id) {
    try { return JSON.parse(sessionStorage.getItem(draftKey(id)) || "null"); } catch { return null; }
  }

  // The date input's value; empty for a date stored out of its range (year 10000, garbage).
  const dayOf = (ms) => {
    if (ms === null || ms === undefined) return "";
    const d = new Date(Number(ms));
    const y = d.getUTCFullYear();
    return Number.isFinite(d.getTime()) && y >= 1 && y <= 9999 ? d.toISOString().slice(0, 10) : "";
  };
  const msOf = (day) => (day ? Date.parse(`${day}T00:00:00Z`) : null);
  const escapeLabel = (name) => name.replace(/[[\]\\]/g, "\\$&");

  // Lines that differ between `a` and `b` (arrays of lines), as [kind, line] with kind " ", "-", "+".
  function lineDiff(a, b) {
    let pre = 0;
    while (pre < a.length && pre < b.length && a[pre] === b[pre]) pre++;
    let suf = 0;
    while (suf < a.length - pre && suf < b.length - pre && a[a.length - 1 - suf] === b[b.length - 1 - suf]) suf++;
    const x = a.slice(pre, a.length - suf), y = b.slice(pre, b.length - suf);
    const out = a.slice(0, pre).map((l) => [" ", l]);
    if (x.length * y.length > 4_000_000) {
      out.push(...x.map((l) => ["-", l]), ...y.map((l) => ["+", l]));
    } else {
      const n = x.length, m = y.length, w = m + 1;
      const L = new Uint32Array((n + 1) * w);
      for (let i = n - 1; i >= 0; i--) {
        for (let j = m - 1; j >= 0; j--) {
          L[i * w + j] = x[i] === y[j] ? L[(i + 1) * w + j + 1] + 1 : Math.max(L[(i + 1) * w + j], L[i * w + j + 1]);
        }
      }
      let i = 0, j = 0;
      while (i < n || j < m) {
        if (i < n && j < m && x[i] === y[j]) { out.push([" ", x[i]]); i++; j++; }
        else if (i < n && (j === m || L[(i + 1) * w + j] >= L[i * w + j + 1])) { out.push(["-", x[i]]); i++; }
        else { out.push(["+", y[j]]); j++; }
      }
    }
    out.push(...a.slice(a.length - suf).map((l) => [" ", l]));
    return out;
  }

  function diffView(oldText, newText) {
    const rows = lineDiff(oldText.split("\n"), newText.split("\n"));
    const box = h("pre", { class: "ne-diff", tabindex: "0", "aria-label": "Differences: lines removed marked −, lines added marked +" });
    let changed = 0;
    for (const [kind, line] of rows) {
      if (kind !== " ") changed++;
      const cls = kind === "-" ? "ne-del" : kind === "+" ? "ne-add" : "ne-same";
      box.append(h(kind === "-" ? "del" : kind === "+" ? "ins" : "span", { class: cls, text: `${kind === "-" ? "−" : kind} ${line}\n` }));
    }
    if (!changed) box.append(h("span", { class: "ne-same", text: "No differences in the text." }));
    return box;
  }

  async function open(container, noteId, opts = {}) {
    // A pane replaced without close() (the app left a trashed note), or this note open again.
    if (current && (current.noteId === noteId || !current.connected())) current.close();
    let note;
    try {
      note = await NL.api("GET", `/api/v1/notes/${encodeURIComponent(noteId)}?trashed=true`);
    } catch (err) {
      if (err.status === 404 || err.status === 422) { if (opts.onMissing) opts.onMissing(); return null; }
      throw err;
    }
    return build(container, note, opts);
  }

  function build(container, note, opts) {
    const id = note.id;
    const s = {
      note, savedTitle: note.title, savedBody: note.body, timer: null, queue: Promise.resolve(),
      status: null, conflict: null, closed: false, preview: false, historyOpen: false, previewTimer: null,
    };
    const el = {};
    const root = h("div", { class: "ne", "data-note": id });

    // -- the pieces ----------------------------------------------------------------------
    el.banner = h("div", { class: "ne-banner", role: "alert", hidden: true });
    el.restoreTrash = h("button", { type: "button", class: "ne-restore-trash", text: "Restore" });
    el.title = h("input", { class: "ne-title", type: "text", maxlength: "1000", "aria-label": "Title", value: note.title });
    el.title.value = note.title;
    el.status = h("span", { class: "ne-status", role: "status", "aria-live": "polite" });
    el.error = h("p", { class: "ne-error", role: "alert", hidden: true });
    el.info = h("p", { class: "ne-info" });
    el.backlinks = h("nav", { class: "ne-backlinks", "aria-labelledby": `ne-backlinks-title-${id}`, hidden: true });
    el.previewBtn = h("button", { type: "button", class: "ne-preview-toggle", "aria-pressed": "false", text: "Preview" });
    el.historyBtn = h("button", { type: "button", class: "ne-history-toggle", "aria-expanded": "false", text: "History" });
    el.file = h("input", { type: "file", class: "ne-file", hidden: true, multiple: true, "aria-hidden": "true", tabindex: "-1" });
    el.attachBtn = h("button", { type: "button", class: "ne-attach", text: "Attach file" });
    el.trashBtn = h("button", { type: "button", class: "ne-trash danger", text: "Move to trash" });
    el.todo = h("input", { type: "checkbox", class: "ne-todo" });
    el.done = h("input", { type: "checkbox", class: "ne-done" });
    el.due = h("input", { type: "date", class: "ne-due" });
    el.todoFields = h("span", { class: "ne-todo-fields" },
      h("label", {}, el.done, " Done"), " ", h("label", {}, "Due ", el.due));
    el.tags = h("ul", { class: "ne-tags", "aria-label": "Tags" });
    el.tagInput = h("input", { type: "text", class: "ne-tag-input", maxlength: "200", placeholder: "Add tag", "aria-label": "Add a tag" });
    el.conflict = h("section", { class: "ne-conflict", hidden: true, "aria-labelledby": `ne-conflict-title-${id}` });
    el.host = h("div", { class: "ne-editor" });
    el.preview = h("div", { class: "ne-preview body rendered", hidden: true, "aria-label": "Preview", tabindex: "0" });
    el.history = h("section", { class: "ne-history", hidden: true, "aria-label": "History" });

    root.append(
      el.banner,
      h("div", { class: "ne-head" }, el.title, el.status),
      h("div", { class: "ne-toolbar", role: "toolbar", "aria-label": "Note" },
        el.previewBtn, el.historyBtn, el.attachBtn, el.file, el.trashBtn),
      h("div", { class: "ne-meta" },
        h("label", { class: "ne-todo-label" }, el.todo, " To-do"), el.todoFields,
        h("span", { class: "ne-tag-box" }, el.tags, el.tagInput)),
      el.info, el.error, el.conflict, el.history, el.host, el.preview, el.backlinks);
    container.replaceChildren(root);

    const editor = NoteloomEditor.create(el.host, {
      doc: note.body,
      label: "Note text",
      onChange: changed,
      onSave: () => { flush().catch(() => {}); },
      onSelection: (sel) => {
        if (opts.onSelection) opts.onSelection(sel);
        window.dispatchEvent(new CustomEvent("noteloom:editor-selection", { detail: { noteId: id, ...sel } }));
      },
      onFiles: (files, pos) => attach(files, pos),
    });

    // -- state shown ---------------------------------------------------------------------
    function setStatus(k) {
      if (s.status === k) return;
      s.status = k;
      el.status.textContent = STATUS[k];
      el.status.dataset.state = k;
    }
    function showError(text) { el.error.textContent = text || ""; el.error.hidden = !text; }
    const dirty = () => !s.closed && (editor.getDoc() !== s.savedBody || el.title.value !== s.savedTitle);

    // Created, updated, due ("invalid date" for one out of range) and where the note came
    // from: the server sends source_url only when it is an http, https or mailto URL, and the
    // check is repeated here so that nothing else can ever become a link.
    function showInfo() {
      const n = s.note;
      const parts = [];
      if (n.created_time) parts.push(h("span", {}, "Created ", h("time", { text: NL.when(n.created_time) })));
      parts.push(h("span", {}, "Updated ", h("time", { text: NL.when(n.updated_time) })));
      if (n.is_todo && n.todo_due) parts.push(h("span", {}, "due ", h("time", { text: NL.when(n.todo_due) })));
      if (n.source_url && LINK_SCHEMES.test(n.source_url)) {
        parts.push(h("a", { href: n.source_url, rel: "noopener noreferrer nofollow", class: "ne-source source", text: "source" }));
      }
      el.info.replaceChildren(...parts.flatMap((p, i) => (i ? [" · ", p] : [p])));
    }

    function showMeta() {
      const n = s.note;
      showInfo();
      el.todo.checked = !!n.is_todo;
      el.todoFields.hidden = !n.is_todo;
      el.done.checked = !!n.todo_completed;
      el.due.value = dayOf(n.todo_due);
      el.tags.replaceChildren(...(n.tags || []).map((t) => h("li", { class: "ne-tag" }, h("span", { text: t }),
        h("button", { type: "button", class: "ne-tag-remove", "aria-label": `Remove tag ${t}`, text: "×",
          onclick: () => setTags((s.note.tags || []).filter((x) => x !== t)) }))));
      const trashed = n.deleted_time !== null && n.deleted_time !== undefined;
      const readOnly = n.writable === false;
      el.banner.hidden = !trashed && !readOnly;
      // Empty while hidden: its words are not the note's (nor a page search's) text.
      if (trashed) {
        el.banner.replaceChildren(h("span", { text: "This note is in the trash." }), ...(readOnly ? [] : [" ", el.restoreTrash]));
      } else if (readOnly) {
        el.banner.replaceChildren(h("span", { text: "You may read this note but not change it (it is shared with you to read only)." }));
      } else {
        el.banner.replaceChildren();
      }
      root.classList.toggle("ne-trashed", trashed);
      for (const b of [el.title, el.todo, el.done, el.due, el.tagInput, el.attachBtn, el.trashBtn]) b.disabled = trashed || readOnly;
      for (const b of el.tags.querySelectorAll("button")) b.disabled = trashed || readOnly;
      editor.setReadOnly(trashed || readOnly);
    }

    function changed() {
      if (s.closed) return;
      showError("");
      if (s.conflict) { setStatus("conflict"); return; }
      setStatus(dirty() ? "dirty" : "saved");
      clearTimeout(s.timer);
      if (dirty()) s.timer = setTimeout(() => save().catch(() => {}), SAVE_DELAY);
      if (s.preview) schedulePreview();
    }

    function accepted(saved, sentTitle, sentBody) {
      s.note = { ...saved, writable: true };
      s.savedTitle = sentTitle;
      s.savedBody = sentBody;
      if (!dirty()) sessionStorage.removeItem(draftKey(id));
      if (opts.onSaved) opts.onSaved(saved);
    }

    // One request at a time, so each carries the version the previous one made.
    function enqueue(work) {
      const run = s.queue.then(work, work);
      s.queue = run.catch(() => {});
      return run;
    }

    // -- saving --------------------------------------------------------------------------
    function save() {
      clearTimeout(s.timer);
      return enqueue(async () => {
        if (s.closed || s.conflict || !dirty()) return;
        const typed = el.title.value;
        const title = typed.trim() ? typed : "Untitled";
        const body = editor.getDoc();
        setStatus("saving");
        try {
          const saved = await NL.api("PATCH", `/api/v1/notes/${id}`,
            { title, body, base_updated_time: s.note.updated_time });
          accepted(saved, typed, body);
          setStatus(dirty() ? "dirty" : "saved");
          loadBacklinks();
          if (dirty()) s.timer = setTimeout(() => save().catch(() => {}), SAVE_DELAY);
        } catch (err) {
          if (err.status === 409) { await startConflict(); return; }
          setStatus("dirty");
          showError(`Not saved: ${err.message}`);
          throw err;
        }
      });
    }

    // A change of one field (tags, to-do): with the version guard, like the text.
    function patchMeta(body) {
      return enqueue(async () => {
        if (s.conflict) { showError("Settle the conflict first."); return; }
        try {
          const saved = await NL.api("PATCH", `/api/v1/notes/${id}`, { ...body, base_updated_time: s.note.updated_time });
          s.note = { ...saved, deleted_time: saved.deleted_time };
          showMeta();
          if (opts.onSaved) opts.onSaved(saved);
        } catch (err) {
          if (err.status === 409) { await startConflict(); return; }
          showError(err.message);
          showMeta();
        }
      });
    }

    function setTags(list) { return patchMeta({ tags: list }); }

    // Save now; throws (the caller keeps the note open) while text stays unsaved or a
    // conflict waits for a decision.
    async function flush() {
      for (let i = 0; i < 3 && dirty() && !s.conflict; i++) {
        clearTimeout(s.timer);
        try { await save(); } catch { break; }
      }
      await s.queue;
      if (s.conflict) {
        throw Object.assign(new Error("this note was changed elsewhere: keep your version or take theirs first"), { status: 409 });
      }
      if (dirty()) throw new Error(el.error.textContent || "the note could not be saved");
    }

    // -- conflicts -----------------------------------------------------------------------
    async function startConflict() {
      let theirs;
      try {
        theirs = await NL.api("GET", `/api/v1/notes/${id}?trashed=true`);
      } catch (err) {
        showError(`This note changed elsewhere and could not be read again: ${err.message}`);
        return;
      }
      showConflict(theirs);
    }

    function showConflict(theirs) {
      s.conflict = theirs;
      clearTimeout(s.timer);
      setStatus("conflict");
      const mine = { title: el.title.value, body: editor.getDoc() };
      el.conflict.replaceChildren(
        h("h2", { id: `ne-conflict-title-${id}`, text: "This note was changed elsewhere" }),
        h("p", { text: "Your changes are not saved yet. Keep your version (it replaces the other) or take the other one (yours is dropped)." }),
        h("div", { class: "ne-versions" },
          h("div", { class: "ne-version ne-mine" }, h("h3", { text: "Your version" }),
            h("p", { class: "ne-version-title", text: mine.title }), h("pre", { class: "ne-version-body", text: mine.body })),
          h("div", { class: "ne-version ne-theirs" }, h("h3", { text: "Saved elsewhere" }),
            h("p", { class: "ne-version-title", text: theirs.title }), h("pre", { class: "ne-version-body", text: theirs.body }))),
        h("div", { class: "ne-conflict-actions" },
          h("button", { type: "button", class: "primary ne-keep-mine", text: "Keep mine", onclick: keepMine }),
          h("button", { type: "button", class: "ne-take-theirs", text: "Take theirs", onclick: takeTheirs })));
      el.conflict.hidden = false;
      el.conflict.querySelector(".ne-keep-mine").focus();
    }

    function endConflict() {
      s.conflict = null;
      el.conflict.hidden = true;
      el.conflict.replaceChildren();
    }

    function keepMine() {
      const theirs = s.conflict;
      if (!theirs) return Promise.resolve();
      return enqueue(async () => {
        const title = el.title.value.trim() ? el.title.value : "Untitled";
        const body = editor.getDoc();
        setStatus("saving");
        try {
          const saved = await NL.api("PATCH", `/api/v1/notes/${id}`, { title, body, base_updated_time: theirs.updated_time });
          endConflict();
          accepted(saved, title, body);
          el.title.value = title;
          setStatus(dirty() ? "dirty" : "saved");
          showMeta();
        } catch (err) {
          if (err.status === 409) { endConflict(); await startConflict(); return; }
          setStatus("conflict");
          showError(`Not saved: ${err.message}`);
        }
      });
    }

    function takeTheirs() {
      const theirs = s.conflict;
      if (!theirs) return;
      endConflict();
      editor.setDoc(theirs.body);
      el.title.value = theirs.title;
      accepted(theirs, theirs.title, theirs.body);
      sessionStorage.removeItem(draftKey(id));
      showMeta();
      setStatus("saved");
      if (opts.onTitle) opts.onTitle(theirs.title);
    }

    // -- preview -------------------------------------------------------------------------
    let previewGen = 0;
    let previewDoc = null;  // the text the preview shows (CodeMirror's immutable document)
    function schedulePreview() {
      if (editor.view && editor.view.state.doc === previewDoc) return;  // the title changed, not the text
      clearTimeout(s.previewTimer);
      s.previewTimer = setTimeout(() => { if (s.preview && !s.closed) renderPreview(); }, PREVIEW_DELAY);
    }

    async function renderPreview() {
      clearTimeout(s.previewTimer);
      const gen = ++previewGen;
      if (editor.view) previewDoc = editor.view.state.doc;
      const text = editor.getDoc();
      try {
        if (window.NoteloomRender && typeof NoteloomRender.renderInto === "function") {
          await NoteloomRender.renderInto(el.preview, text, { onToggleTask: toggleTask });
        } else {
          const data = await NL.api("POST", "/api/v1/notes/preview", { markdown: text });
          if (gen === previewGen) NL.setHtml(el.preview, data.html);
        }
      } catch (err) {
        if (gen === previewGen) el.preview.replaceChildren(h("p", { class: "ne-error", text: `Preview failed: ${err.message}` }));
      }
    }

    // A task box clicked in the preview: tick it in the text (saved like any other change).
    function toggleTask(lineIndex, done) {
      const doc = editor.view.state.doc;
      if (lineIndex < 0 || lineIndex >= doc.lines) return;
      const line = doc.line(lineIndex + 1);
      const m = TASK.exec(line.text);
      if (!m) return;
      const at = line.from + m[1].length;
      editor.view.dispatch({ changes: { from: at, to: at + 1, insert: done ? "x" : " " }, userEvent: "input" });
    }

    function setPreview(on) {
      s.preview = on;
      el.previewBtn.setAttribute("aria-pressed", String(on));
      el.preview.hidden = !on;
      el.host.hidden = on;
      if (on) renderPreview(); else editor.focus();
    }

    // -- backlinks -----------------------------------------------------------------------
    // The notes that link here ("Linked from"), read when the note opens, after each save of
    // it and when the window gets the focus back (a note that links here may have been saved
    // in another tab meanwhile); none: no list. Only the newest read is drawn.
    let backlinksRead = 0;
    async function loadBacklinks() {
      const read = ++backlinksRead;
      let links;
      try {
        links = await NL.api("GET", `/api/v1/notes/${encodeURIComponent(id)}/backlinks`);
      } catch {
        return;  // a trashed note has none to show; the note itself is what matters here
      }
      if (s.closed || read !== backlinksRead || !Array.isArray(links)) return;
      el.backlinks.hidden = !links.length;
      el.backlinks.replaceChildren(...(links.length ? [
        h("h2", { id: `ne-backlinks-title-${id}`, text: "Linked from" }),
        h("ul", {}, ...links.map((b) => h("li", {}, h("a", { href: `/notes/${encodeURIComponent(b.id)}`, text: b.title || "(untitled)" }))))] : []));
    }

    // -- attachments ---------------------------------------------------------------------
    async function attach(files, pos) {
      let at = pos;
      for (const file of files) {
        const form = new FormData();
        form.append("file", file, file.name || "file");
        showError("");
        let res;
        try {
          res = await NL.authFetch(`/api/v1/notes/${id}/attachments`, { method: "POST", body: form });
        } catch (err) {
          showError(`Could not attach ${file.name}: ${err.message}`);
          return;
        }
        const data = await res.json().catch(() => ({}));
        if (!res.ok) { showError(`Could not attach ${file.name}: ${data.message || res.status}`); return; }
        const name = escapeLabel(data.filename || file.name || "file");
        const link = `${data.mime && data.mime.startsWith("image/") ? "!" : ""}[${name}](:/${data.id})`;
        const doc = editor.getDoc();
        const before = at === undefined || at === null ? null : at;
        const sep = before !== null && before > 0 && doc[before - 1] !== "\n" && doc[before - 1] !== " " ? " " : "";
        editor.insertAtCursor(sep + link, before);
        if (before !== null) at = before + sep.length + link.length;
      }
    }

    // -- history -------------------------------------------------------------------------
    async function openHistory() {
      el.history.replaceChildren(h("h2", { text: "History" }), h("p", { class: "muted", text: "Loading…" }));
      el.history.hidden = false;
      el.historyBtn.setAttribute("aria-expanded", "true");
      s.historyOpen = true;
      let data;
      try {
        data = await NL.api("GET", `/api/v1/notes/${id}/revisions`);
      } catch (err) {
        el.history.replaceChildren(h("h2", { text: "History" }), h("p", { class: "ne-error", text: err.message }));
        return;
      }
      const list = h("ul", { class: "ne-revisions" });
      const detail = h("div", { class: "ne-revision-detail" });
      for (const r of data.revisions) {
        const when = NL.when(r.version_time);
        list.append(h("li", {}, h("button", { type: "button", class: "ne-revision", "data-revision": r.id,
          text: `${when} · ${r.title} · ${r.chars} characters`, onclick: () => showRevision(r, detail) })));
      }
      if (!data.revisions.length) list.append(h("li", { class: "muted", text: "No earlier versions yet." }));
      el.history.replaceChildren(
        h("div", { class: "ne-history-head" }, h("h2", { text: "History" }),
          h("button", { type: "button", class: "ne-history-close", text: "Close", onclick: closeHistory })),
        list, detail);
      const first = list.querySelector("button");
      if (first) first.focus();
    }

    function closeHistory() {
      el.history.hidden = true;
      el.history.replaceChildren();
      el.historyBtn.setAttribute("aria-expanded", "false");
      s.historyOpen = false;
      el.historyBtn.focus();
    }

    async function showRevision(r, detail) {
      for (const b of el.history.querySelectorAll(".ne-revision")) b.setAttribute("aria-pressed", String(b.dataset.revision === r.id));
      detail.replaceChildren(h("p", { class: "muted", text: "Loading…" }));
      let rev;
      try {
        rev = await NL.api("GET", `/api/v1/notes/${id}/revisions/${r.id}`);
      } catch (err) {
        detail.replaceChildren(h("p", { class: "ne-error", text: err.message }));
        return;
      }
      const titleLine = rev.title !== el.title.value ? h("p", { class: "ne-diff-title", text: `Title then: ${rev.title}` }) : null;
      detail.replaceChildren(...[
        h("h3", { text: `Changes from ${NL.when(r.version_time)} to now` }),
        titleLine,
        diffView(rev.body, editor.getDoc()),
        h("button", { type: "button", class: "primary ne-revision-restore", text: "Restore this version",
          onclick: () => restoreRevision(r.id) })].filter(Boolean));
    }

    async function restoreRevision(revId) {
      try { await flush(); } catch (err) { showError(`Not restored: ${err.message}`); return; }
      await enqueue(async () => {
        try {
          const restored = await NL.api("POST", `/api/v1/notes/${id}/revisions/${revId}/restore`);
          editor.setDoc(restored.body);
          el.title.value = restored.title;
          accepted(restored, restored.title, restored.body);
          showMeta();
          setStatus("saved");
          if (opts.onTitle) opts.onTitle(restored.title);
        } catch (err) {
          showError(`Not restored: ${err.message}`);
        }
      });
      if (s.historyOpen) closeHistory();
    }

    // -- the trash -----------------------------------------------------------------------
    async function trash() {
      try { await flush(); } catch (err) { showError(`Not moved to the trash: ${err.message}`); return; }
      try {
        await NL.api("DELETE", `/api/v1/notes/${id}`);
      } catch (err) { showError(`Not moved to the trash: ${err.message}`); return; }
      s.note = { ...s.note, deleted_time: Date.now() };
      showMeta();
      el.restoreTrash.focus();
      if (opts.onTrashed) opts.onTrashed();
    }

    async function untrash() {
      try {
        const back = await NL.api("POST", `/api/v1/notes/${id}/restore`);
        s.note = back;
        showMeta();
        editor.focus();
        if (opts.onSaved) opts.onSaved(back);
      } catch (err) { showError(`Not restored: ${err.message}`); }
    }

    // -- wiring --------------------------------------------------------------------------
    el.title.addEventListener("input", () => { changed(); if (opts.onTitle) opts.onTitle(el.title.value); });
    el.title.addEventListener("keydown", (e) => {
      if (e.key === "Enter") { e.preventDefault(); editor.focus(); }
      if ((e.ctrlKey || e.metaKey) && e.key.toLowerCase() === "s") { e.preventDefault(); flush().catch(() => {}); }
    });
    el.title.addEventListener("blur", () => { if (dirty()) save().catch(() => {}); });
    el.host.addEventListener("focusout", (e) => {
      if (!el.host.contains(e.relatedTarget) && dirty()) save().catch(() => {});
    });
    el.previewBtn.addEventListener("click", () => setPreview(!s.preview));
    el.historyBtn.addEventListener("click", () => (s.historyOpen ? closeHistory() : openHistory()));
    el.attachBtn.addEventListener("click", () => el.file.click());
    el.file.addEventListener("change", () => { const files = Array.from(el.file.files); el.file.value = ""; attach(files, null); });
    el.trashBtn.addEventListener("click", trash);
    el.restoreTrash.addEventListener("click", untrash);
    el.todo.addEventListener("change", () => patchMeta({ is_todo: el.todo.checked }));
    el.done.addEventListener("change", () => patchMeta({ todo_completed: el.done.checked ? Date.now() : null }));
    el.due.addEventListener("change", () => patchMeta({ todo_due: msOf(el.due.value) }));
    el.tagInput.addEventListener("keydown", (e) => {
      if (e.key !== "Enter" && e.key !== ",") return;
      e.preventDefault();
      const tag = el.tagInput.value.trim();
      if (!tag) return;
      el.tagInput.value = "";
      const have = s.note.tags || [];
      if (!have.some((t) => t.toLowerCase() === tag.toLowerCase())) setTags([...have, tag]);
    });
    root.addEventListener("dragover", (e) => {
      if (e.dataTransfer && Array.from(e.dataTransfer.types || []).includes("Files")) e.preventDefault();
    });
    root.addEventListener("drop", (e) => {
      const files = e.dataTransfer ? Array.from(e.dataTransfer.files) : [];
      if (!files.length || e.defaultPrevented) return;
      e.preventDefault();
      attach(files, null);
    });

    function keepDraft() {
      if (dirty()) {
        sessionStorage.setItem(draftKey(id), JSON.stringify({ title: el.title.value, body: editor.getDoc(), base: s.note.updated_time }));
      }
    }
    function beforeUnload(e) {
      if (!dirty() && !s.conflict) return;
      keepDraft();
      save().catch(() => {});
      e.preventDefault();
      e.returnValue = "";
    }
    window.addEventListener("beforeunload", beforeUnload);
    window.addEventListener("pagehide", keepDraft);
    const backlinksOnFocus = () => { if (!s.closed) loadBacklinks(); };
    window.addEventListener("focus", backlinksOnFocus);

    function close() {
      if (s.closed) return;
      keepDraft();
      clearTimeout(s.timer);
      clearTimeout(s.previewTimer);
      s.closed = true;
      window.removeEventListener("beforeunload", beforeUnload);
      window.removeEventListener("pagehide", keepDraft);
      window.removeEventListener("focus", backlinksOnFocus);
      editor.destroy();
      if (current === handle) { current = null; NoteEditor.current = null; }
    }

    // Proposed edits for the pane's note: unsaved text is saved first and an accepted edit
    // at once, so the edit is its own revision as well as its own undo step.
    async function proposeEdits(edits, o = {}) {
      await flush().catch(() => {});
      editor.proposeEdits(edits, { onDecision: (eid, ok, reason) => {
        if (ok) save().catch(() => {});
        if (o.onDecision) o.onDecision(eid, ok, reason);
      } });
    }

    // A version of this note saved by someone else on the user's behalf (the chat applied an
    // edit the editor shows too): the new base, so the next save does not read as a conflict.
    function adopt(saved) {
      if (!saved || saved.id !== id) return;
      s.note = { ...s.note, ...saved };
      if (editor.getDoc() === saved.body) s.savedBody = saved.body;
      if (el.title.value === saved.title) s.savedTitle = saved.title;
      showMeta();
      setStatus(dirty() ? "dirty" : "saved");
    }

    function scrollToSection(section) { return editor.scrollToHeading(section); }

    const handle = { flush, dirty, close, editor, noteId: id, note: () => s.note, proposeEdits, adopt, scrollToSection,
      showSection: scrollToSection, connected: () => root.isConnected };
    current = handle;
    NoteEditor.current = handle;

    showMeta();
    setStatus("saved");
    loadBacklinks();
    // Text left unsaved here before (a closed tab, a conflict left open): offer it back.
    const draft = readDraft(id);
    if (draft && (draft.body !== note.body || draft.title !== note.title)) {
      if (draft.base === note.updated_time) {
        editor.setDoc(draft.body);
        el.title.value = draft.title;
        changed();
      } else {
        editor.setDoc(draft.body);
        el.title.value = draft.title;
        showConflict(note);
      }
    } else if (draft) {
      sessionStorage.removeItem(draftKey(id));
    }
    if (opts.section) {
      requestAnimationFrame(() => editor.scrollToHeading(opts.section));
    }
    if (opts.onTitle) opts.onTitle(el.title.value);
    return handle;
  }

  window.NoteEditor = { open, current: null, lineDiff };
})();
