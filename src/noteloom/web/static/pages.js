// The note pages: the notebook tree, a list of notes, one rendered note. The HTML the server
// sends is an empty shell; everything shown here is fetched with the session header.
// Text goes in with textContent; only the server's sanitised note HTML goes in as HTML.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);

  const h = NL.h;

  const idFromPath = () => decodeURIComponent(location.pathname.split("/").pop() || "");

  function todoBadge(n) {
    if (!n.is_todo) return null;
    const due = n.todo_due ? ` · due ${NL.when(n.todo_due)}` : "";
    return h("span", { class: `todo${n.todo_completed ? " done" : ""}`, text: (n.todo_completed ? "done" : "to-do") + due });
  }

  async function showTree(current) {
    const books = await NL.api("GET", "/api/v1/notebooks");
    const ids = new Set(books.map((b) => b.id));
    const children = new Map();
    for (const b of books) {
      const parent = ids.has(b.parent_id) ? b.parent_id : null;
      if (!children.has(parent)) children.set(parent, []);
      children.get(parent).push(b);
    }
    const list = $("tree");
    list.replaceChildren();
    const walk = (parent, depth) => {
      for (const b of children.get(parent) || []) {
        const li = h("li", {}, h("a", { href: `/notebooks/${encodeURIComponent(b.id)}`, "aria-current": current === b.id ? "page" : null, text: b.title }),
          " ", h("span", { class: "count", text: String(b.note_count) }));
        li.style.setProperty("--depth", String(depth));  // CSSOM: allowed under the CSP, unlike a style attribute
        list.append(li);
        walk(b.id, depth + 1);
      }
    };
    walk(null, 0);
    if (!books.length) list.append(h("li", { class: "empty", text: "No notebooks yet." }));
    list.removeAttribute("aria-busy");
    return books;
  }

  async function showList(notebookId) {
    const [books, data] = await Promise.all([
      showTree(notebookId),
      NL.api("GET", notebookId ? `/api/v1/notes?limit=500&notebook_id=${encodeURIComponent(notebookId)}` : "/api/v1/notes?limit=50"),
    ]);
    if (notebookId) {
      const book = books.find((b) => b.id === notebookId);
      $("list-title").textContent = book ? book.title : "No such notebook";
      document.title = `${$("list-title").textContent} · noteloom`;
    } else {
      document.title = "Recent notes · noteloom";
      showIndexStatus();
    }
    const list = $("notes");
    list.replaceChildren();
    for (const n of data.notes) {
      const iso = NL.when(n.updated_time, "iso");
      list.append(h("li", {}, h("a", { href: `/notes/${encodeURIComponent(n.id)}`, text: n.title || "(untitled)" }), todoBadge(n),
        h("time", { datetime: iso === "invalid date" ? null : iso, text: NL.when(n.updated_time) })));
    }
    if (!data.notes.length) list.append(h("li", { class: "empty", text: "No notes here yet." }));
    list.removeAttribute("aria-busy");
  }

  async function showIndexStatus() {
    const s = await NL.api("GET", "/api/v1/index/status");
    if (!s.enabled) return;
    const box = $("index-status");
    box.textContent = `Semantic index: ${s.state} · ${s.indexed_notes} notes, ${s.chunks} chunks` +
      (s.pending_notes ? ` · ${s.pending_notes} pending` : "") + ` · ${s.model}` + (s.dimensions ? ` (${s.dimensions} dimensions)` : "");
    box.hidden = false;
  }

  async function showNote() {
    let note;
    try {
      note = await NL.api("GET", `/api/v1/notes/${encodeURIComponent(idFromPath())}/rendered`);
    } catch (err) {
      if (err.status === 401) return;
      $("note-title").textContent = err.status === 404 || err.status === 422 ? "No such note" : "This note could not be loaded";
      $("note-body").textContent = err.message;
      $("note-body").removeAttribute("aria-busy");
      showTree(null);
      return;
    }
    showTree(note.notebook_id);
    document.title = `${note.title || "(untitled)"} · noteloom`;
    $("note-title").textContent = note.title || "(untitled)";
    const meta = $("note-meta");
    meta.replaceChildren("Updated ", h("time", { text: NL.when(note.updated_time) }));
    if (note.tags.length) meta.append(" · tags: ", ...note.tags.map((t) => h("span", { class: "tag", text: t })));
    if (note.is_todo) meta.append(` · ${note.todo_completed ? "done" : "to-do"}` + (note.todo_due ? `, due ${NL.when(note.todo_due)}` : ""));
    // The server sends source_url only when it is an http, https or mailto URL; the check
    // is repeated here so that nothing else can ever become a link.
    if (note.source_url && /^(https?|mailto):/i.test(note.source_url)) {
      meta.append(" · ", h("a", { href: note.source_url, rel: "noopener noreferrer nofollow", class: "source", text: "source" }));
    }
    NL.setHtml($("note-body"), note.html);
    $("note-body").removeAttribute("aria-busy");
  }

  NL.start(() => {
    const page = document.body.dataset.page;
    const run = page === "note" ? showNote() : showList(page === "notebook" ? idFromPath() : null);
    run.catch((err) => {
      if (err.status === 401) return;  // the sign-in form is showing
      const main = $("main");
      main.append(h("p", { class: "form-error", role: "alert", text: err.message }));
    });
  });
})();
