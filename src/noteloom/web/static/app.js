// The notes app: the notebook tree, the note list and the note, at one address per view
// (/, /notebooks/ID, /notes/ID, /search?q=…). The HTML is an empty shell; everything shown
// is fetched with the session header (session.js), text goes in with textContent, and only
// the server's sanitised note HTML goes in as HTML.
//
// The note pane belongs to the note editor when one is loaded (window.NoteEditor, from
// note_editor.js): NoteEditor.open(container, id, {section, onSaved, onTitle, onTrashed,
// onMissing}) returns a handle (or a promise of one), drawn in a container off the page whose
// content moves into the pane only if the note is still the one asked for; before the app
// leaves a note it awaits handle.flush() and calls handle.close(). `section` is the heading text of the section to
// show first (from a search hit, `?section=` in the address), or null. When the open note is
// asked for at another section, handle.showSection(section) is called if the editor has it,
// else the note is flushed, closed and opened again there. Without the editor the note is
// shown read-only: the server's rendered HTML (GET .../rendered, links resolved there) made
// live in place by NoteloomRender.enhance (highlighting, math, task boxes), with its backlinks.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const h = NL.h;
  const PHONE = window.matchMedia("(max-width: 760px)");
  const COLLAPSED_KEY = "noteloom.tree.collapsed";
  const TREE_HIDDEN_KEY = "noteloom.tree.hidden";
  const PAGE = 50;
  const SEARCH_PAGE = 30;
  const NOTE_DRAG = "application/x-noteloom-note";

  const state = {
    books: [],            // the tree's notebooks
    byId: new Map(),
    total: 0,
    list: null,           // { kind: "all" | "notebook" | "search", notebookId, q, mode }
    listKey: "",
    listGen: 0,
    cursor: null,         // next page: a cursor (notes) or an offset (search)
    done: true,
    loading: null,
    noteId: null,
    noteGen: 0,
    handle: null,         // the editor's handle of the open note
  };

  // -- addresses --------------------------------------------------------------------------

  function parseRoute(loc = location) {
    const parts = loc.pathname.split("/").filter(Boolean).map(decodeURIComponent);
    const params = new URLSearchParams(loc.search);
    if (parts[0] === "notes" && parts[1]) return { kind: "note", noteId: parts[1], section: params.get("section") || "" };
    if (parts[0] === "notebooks" && parts[1]) return { kind: "notebook", notebookId: parts[1] };
    if (parts[0] === "search") return { kind: "search", q: params.get("q") || "", mode: params.get("mode") || "" };
    return { kind: "all" };
  }

  function listUrl(list) {
    if (!list || list.kind === "all") return "/";
    if (list.kind === "notebook") return `/notebooks/${encodeURIComponent(list.notebookId)}`;
    const p = new URLSearchParams({ q: list.q });
    if (list.mode) p.set("mode", list.mode);
    return `/search?${p}`;
  }

  function noteUrl(id, section) {
    return `/notes/${encodeURIComponent(id)}` + (section ? `?${new URLSearchParams({ section })}` : "");
  }

  const listOf = (route) => (route.kind === "note" ? null : { kind: route.kind, notebookId: route.notebookId || null, q: route.q || "", mode: route.mode || "" });

  // Go to `url`: leave the open note first (its text saved), then draw the new view.
  async function go(url, { replace = false, list = null } = {}) {
    const target = new URL(url, location.href);
    const route = parseRoute(target);
    if (route.kind !== "note" || route.noteId !== state.noteId) {
      if (!(await leaveNote())) return;
    }
    const hist = { list: list || listOf(route) || state.list };
    const same = target.pathname + target.search === location.pathname + location.search;
    if (replace || same) history.replaceState(hist, "", target.pathname + target.search + target.hash);
    else history.pushState(hist, "", target.pathname + target.search + target.hash);
    await show();
  }

  window.addEventListener("popstate", async () => {
    const route = parseRoute();
    if (state.noteId && (route.kind !== "note" || route.noteId !== state.noteId)) {
      const was = state.noteId;
      if (!(await leaveNote())) { history.pushState({ list: state.list }, "", noteUrl(was)); return; }
    }
    show().catch(report);
  });

  // -- the view -----------------------------------------------------------------------------

  async function show() {
    const route = parseRoute();
    const list = listOf(route) || (history.state && history.state.list) || state.list || { kind: "all", notebookId: null, q: "", mode: "" };
    document.body.dataset.view = route.kind === "note" ? "note" : "list";
    // The page's one h1 is the view's title: the list's name, or the note's (its pane draws it).
    $("list-title").setAttribute("aria-level", route.kind === "note" ? "2" : "1");
    closeDrawers();
    if (list.kind === "search") {
      $("search-input").value = list.q;
      $("search-mode").value = list.mode || "";
    }
    const work = [loadList(list)];
    if (route.kind === "note") work.push(openNote(route.noteId, route.section));
    else showNoNote();
    markTree();
    await Promise.all(work);
  }

  function report(err) {
    if (err && err.status === 401) return;  // the sign-in form is showing
    status(err && err.message ? err.message : String(err));
  }

  function status(text) { $("list-status").textContent = text; }

  // -- the tree -----------------------------------------------------------------------------

  const collapsed = () => new Set(JSON.parse(localStorage.getItem(COLLAPSED_KEY) || "[]"));

  function setCollapsed(id, on) {
    const set = collapsed();
    if (on) set.add(id); else set.delete(id);
    localStorage.setItem(COLLAPSED_KEY, JSON.stringify([...set]));
  }

  async function loadTree() {
    const data = await NL.api("GET", "/api/v1/browse/tree");
    state.books = data.notebooks;
    state.byId = new Map(data.notebooks.map((b) => [b.id, b]));
    state.total = data.total;
    drawTree();
    if (state.list && state.list.kind === "notebook") setListTitle();
  }

  function childrenMap() {
    const map = new Map();
    for (const b of state.books) {
      const parent = state.byId.has(b.parent_id) ? b.parent_id : null;
      if (!map.has(parent)) map.set(parent, []);
      map.get(parent).push(b);
    }
    return map;
  }

  function drawTree() {
    const tree = $("tree");
    const kids = childrenMap();
    const folded = collapsed();
    const all = h("li", { class: "tree-all" }, h("div", { class: "tree-row" },
      h("span", { class: "twisty-space" }),
      h("a", { href: "/", class: "nb-link", "data-nb": "", text: "All notes" }),
      h("span", { class: "count", text: String(state.total) })));
    const walk = (parent) => {
      const items = [];
      for (const b of kids.get(parent) || []) {
        const sub = kids.get(b.id);
        const row = h("div", { class: "tree-row", "data-drop": b.id });
        const li = h("li", { "data-notebook": b.id }, row);
        if (sub) {
          const open = !folded.has(b.id);
          row.append(h("button", {
            type: "button", class: "twisty", "aria-expanded": String(open), "aria-controls": `sub-${b.id}`,
            "aria-label": `${b.title}: show sub-notebooks`, onclick: toggleBranch,
          }));
        } else {
          row.append(h("span", { class: "twisty-space" }));
        }
        row.append(h("a", { href: `/notebooks/${encodeURIComponent(b.id)}`, class: "nb-link", "data-nb": b.id, text: b.title }),
          h("span", { class: "count", title: `${b.note_count} here, ${b.total_count} with sub-notebooks`, text: String(b.total_count) }));
        if (sub) {
          const ul = h("ul", { id: `sub-${b.id}`, class: "tree-sub", role: "group" }, ...walk(b.id));
          ul.hidden = folded.has(b.id);
          li.append(ul);
        }
        items.push(li);
      }
      return items;
    };
    tree.replaceChildren(all, ...walk(null));
    if (!state.books.length) tree.append(h("li", { class: "empty", text: "No notebooks yet." }));
    tree.removeAttribute("aria-busy");
    markTree();
  }

  function toggleBranch(e) {
    const button = e.currentTarget;
    const open = button.getAttribute("aria-expanded") !== "true";
    button.setAttribute("aria-expanded", String(open));
    $(button.getAttribute("aria-controls")).hidden = !open;
    setCollapsed(button.closest("li").dataset.notebook, !open);
  }

  function markTree() {
    const current = state.list && state.list.kind === "notebook" ? state.list.notebookId
      : state.list && state.list.kind === "all" ? "" : null;
    for (const a of $("tree").querySelectorAll("a.nb-link")) {
      if (a.dataset.nb !== current) { a.removeAttribute("aria-current"); continue; }
      a.setAttribute("aria-current", "page");
      // A notebook opened from elsewhere (a link, the address) shows, its branches opened.
      for (let ul = a.closest("ul.tree-sub"); ul; ul = ul.parentElement.closest("ul.tree-sub")) {
        if (!ul.hidden) continue;
        ul.hidden = false;
        const button = ul.parentElement.querySelector(":scope > .tree-row > button.twisty");
        if (button) button.setAttribute("aria-expanded", "true");
      }
    }
  }

  // Drop a note from the list onto a notebook of the tree to move it there.
  function wireDrops() {
    const tree = $("tree");
    const target = (e) => (e.dataTransfer && [...e.dataTransfer.types].includes(NOTE_DRAG) ? e.target.closest("[data-drop]") : null);
    tree.addEventListener("dragover", (e) => {
      const row = target(e);
      if (!row) return;
      e.preventDefault();
      e.dataTransfer.dropEffect = "move";
      for (const r of tree.querySelectorAll(".drop-over")) if (r !== row) r.classList.remove("drop-over");
      row.classList.add("drop-over");
    });
    tree.addEventListener("dragleave", (e) => {
      const row = e.target.closest && e.target.closest("[data-drop]");
      if (row && !row.contains(e.relatedTarget)) row.classList.remove("drop-over");
    });
    tree.addEventListener("drop", (e) => {
      const row = target(e);
      if (!row) return;
      e.preventDefault();
      row.classList.remove("drop-over");
      moveNote(e.dataTransfer.getData(NOTE_DRAG), row.dataset.drop).catch(report);
    });
  }

  async function moveNote(noteId, notebookId) {
    const row = $("notes").querySelector(`li[data-id="${CSS.escape(noteId)}"]`);
    const title = row ? row.dataset.title : "the note";
    await NL.api("POST", `/api/v1/notes/${encodeURIComponent(noteId)}/move`, { notebook_id: notebookId });
    const book = state.byId.get(notebookId);
    await loadTree();
    if (row) {
      if (state.list.kind === "notebook" && !subtree(state.list.notebookId).has(notebookId)) row.remove();
      else row.querySelector(".nb").textContent = book ? book.title : "";
    }
    status(`Moved “${title}” to ${book ? book.title : "the notebook"}.`);
  }

  function subtree(root) {
    const kids = childrenMap();
    const out = new Set();
    const todo = [root];
    while (todo.length) {
      const id = todo.pop();
      if (out.has(id)) continue;
      out.add(id);
      for (const b of kids.get(id) || []) todo.push(b.id);
    }
    return out;
  }

  // -- the list -----------------------------------------------------------------------------

  async function loadList(list, { force = false } = {}) {
    const key = JSON.stringify(list);
    if (key === state.listKey && !force) return;
    state.list = list;
    state.listKey = key;
    state.listGen += 1;
    state.cursor = null;
    state.done = false;
    state.loading = null;
    const ul = $("notes");
    ul.replaceChildren();
    ul.setAttribute("aria-busy", "true");
    if (list.kind !== "all") indexStatus("");
    status("");
    setListTitle();
    markTree();
    await loadMore();
    if (list.kind === "all" && state.listKey === key) showIndexStatus().catch(() => {});
  }

  function setListTitle() {
    const list = state.list;
    let title = "All notes";
    if (list.kind === "notebook") {
      const b = state.byId.get(list.notebookId);
      title = b ? b.title : state.books.length ? "No such notebook" : "Notebook";
    } else if (list.kind === "search") {
      title = list.q ? `Search: ${list.q}` : "Search";
    }
    $("list-title").textContent = title;
    if (document.body.dataset.view !== "note") document.title = `${title} · noteloom`;
  }

  function loadMore() {
    if (state.done) return Promise.resolve();
    if (!state.loading) {
      const gen = state.listGen;
      state.loading = fetchPage().then((page) => {
        if (gen !== state.listGen) return;
        appendRows(page.items);
        state.cursor = page.next;
        state.done = page.next === null || page.next === undefined;
        state.loading = null;
        const ul = $("notes");
        ul.removeAttribute("aria-busy");
        if (!ul.children.length) {
          const empty = state.list.kind !== "search" ? "No notes here yet."
            : state.list.q.trim() ? "Nothing matches this search." : "Type what to look for in the search box.";
          ul.append(h("li", { class: "empty", text: empty }));
        }
        $("load-more").hidden = state.done;
        rewatch();
      }, (err) => {
        if (gen === state.listGen) {
          state.loading = null;
          $("notes").removeAttribute("aria-busy");
        }
        throw err;
      });
    }
    return state.loading;
  }

  async function fetchPage() {
    const list = state.list;
    if (list.kind === "search") {
      if (!list.q.trim()) return { items: [], next: null };
      const p = new URLSearchParams({ q: list.q, limit: String(SEARCH_PAGE), offset: String(state.cursor || 0) });
      if (list.mode) p.set("mode", list.mode);
      const data = await NL.api("GET", `/api/v1/browse/search?${p}`);
      return { items: data.results.map((r) => ({ ...r, search: true })), next: data.next_offset };
    }
    const p = new URLSearchParams({ limit: String(PAGE) });
    if (list.kind === "notebook") p.set("notebook_id", list.notebookId);
    if (state.cursor) p.set("cursor", state.cursor);
    const data = await NL.api("GET", `/api/v1/browse/notes?${p}`);
    return { items: data.notes, next: data.next_cursor };
  }

  function todoBadge(n) {
    if (!n.is_todo) return null;
    const due = n.todo_due ? ` · due ${NL.when(n.todo_due)}` : "";
    return h("span", { class: `todo${n.todo_completed ? " done" : ""}`, text: (n.todo_completed ? "done" : "to-do") + due });
  }

  function appendRows(items) {
    const ul = $("notes");
    for (const n of items) {
      const iso = NL.when(n.updated_time, "iso");
      const section = n.search && n.section && n.section !== "0" && n.section_heading ? n.section_heading : "";
      const link = h("a", { href: noteUrl(n.id, section), class: "note-link", "data-note": n.id, text: n.title || "(untitled)" });
      const li = h("li", { "data-id": n.id, "data-title": n.title || "(untitled)", draggable: "true" },
        h("div", { class: "note-row-head" }, link,
          h("button", { type: "button", class: "row-move", "aria-label": `Move “${n.title || "(untitled)"}” to another notebook`, text: "Move…" })),
        h("div", { class: "note-row-meta" },
          h("span", { class: "nb", text: n.notebook || "" }),
          n.updated_time ? h("time", { datetime: iso === "invalid date" ? null : iso, text: NL.when(n.updated_time) }) : null,
          todoBadge(n), ...(n.tags || []).map((t) => h("span", { class: "tag", text: t }))));
      if (n.search) {
        if (section) li.append(h("p", { class: "section", text: `§ ${section}` }));
        if (n.snippet) li.append(h("p", { class: "snippet", text: n.snippet }));
      }
      if (n.id === state.noteId) link.setAttribute("aria-current", "page");
      ul.append(li);
    }
  }

  // Pages load as the sentinel under the list comes into view; the button does the same
  // for a keyboard. Observing again after each page re-checks a sentinel still in view.
  let watcher = null;
  function rewatch() {
    const sentinel = $("notes-sentinel");
    if (!watcher) {
      watcher = new IntersectionObserver((entries) => {
        if (entries.some((e) => e.isIntersecting)) loadMore().catch(report);
      }, { root: null, rootMargin: "300px 0px" });
    }
    watcher.unobserve(sentinel);
    if (!state.done) watcher.observe(sentinel);
  }

  function markList() {
    for (const a of $("notes").querySelectorAll("a.note-link")) {
      if (a.dataset.note === state.noteId) a.setAttribute("aria-current", "page");
      else a.removeAttribute("aria-current");
    }
  }

  async function showIndexStatus() {
    const s = await NL.api("GET", "/api/v1/index/status");
    if (!s.enabled || !state.list || state.list.kind !== "all") return;
    indexStatus(`Semantic index: ${s.state} · ${s.indexed_notes} notes, ${s.chunks} chunks` +
      (s.pending_notes ? ` · ${s.pending_notes} pending` : "") + ` · ${s.model}` + (s.dimensions ? ` (${s.dimensions} dimensions)` : ""));
  }

  // The indexing status is a polite live region that stays in the page: its text is written
  // only when it changes, so a screen reader hears a change once, not every refresh.
  function indexStatus(text) {
    const box = $("index-status");
    if (box.textContent !== text) box.textContent = text;
  }

  // -- the note -----------------------------------------------------------------------------

  // Save and close the open note. False when its text could not be saved (the note stays).
  async function leaveNote() {
    const handle = state.handle;
    if (handle) {
      try {
        await handle.flush();
      } catch (err) {
        if (err && err.status === 401) return false;
        status(`Not saved: ${err && err.message ? err.message : err}. The note stays open.`);
        return false;
      }
      handle.close();
    }
    state.handle = null;
    state.noteId = null;
    state.noteGen += 1;
    return true;
  }

  function showNoNote() {
    state.noteId = null;
    markList();
    const pane = $("note-pane");
    pane.replaceChildren(h("div", { class: "empty-state" },
      h("p", { text: "Pick a note from the list, or make a new one." }),
      h("button", { type: "button", class: "primary", onclick: () => newNote().catch(report), text: "New note" }),
      h("button", { type: "button", class: "phone-only", onclick: () => openDrawer("tree-pane"), text: "Notebooks" })));
  }

  function editorCallbacks(id, gen) {
    const live = () => gen === state.noteGen;
    return {
      onSaved(note) {
        if (!live() || !note) return;
        const row = $("notes").querySelector(`li[data-id="${CSS.escape(id)}"]`);
        if (row && note.title !== undefined) {
          row.dataset.title = note.title;
          row.querySelector("a.note-link").textContent = note.title || "(untitled)";
        }
        if (row && note.updated_time) {
          const t = row.querySelector("time");
          if (t) t.textContent = NL.when(note.updated_time);
        }
      },
      onTitle(title) {
        if (!live()) return;
        document.title = `${title || "(untitled)"} · noteloom`;
        const heading = $("note-heading");
        if (heading) heading.textContent = title || "(untitled)";
        const link = $("notes").querySelector(`li[data-id="${CSS.escape(id)}"] a.note-link`);
        if (link) link.textContent = title || "(untitled)";
      },
      onTrashed() {
        if (!live()) return;
        const row = $("notes").querySelector(`li[data-id="${CSS.escape(id)}"]`);
        if (row) row.remove();
        state.handle = null;
        state.noteId = null;
        loadTree().catch(report);
        go(listUrl(state.list), { replace: true }).catch(report);
      },
      onMissing() {
        if (live()) showMissing();
      },
    };
  }

  async function openNote(id, section) {
    if (state.noteId === id && (state.handle || $("note-pane").dataset.note === id)) {
      if (!section) return;
      if (!state.handle) { scrollToSection(section); return; }
      // The open note, at another section: the editor goes there (or opens it afresh there).
      if (typeof state.handle.showSection === "function") { state.handle.showSection(section); return; }
      if (!(await leaveNote())) return;
    }
    state.noteId = id;
    state.noteGen += 1;
    const gen = state.noteGen;
    markList();
    const pane = $("note-pane");
    pane.replaceChildren();
    pane.dataset.note = id;
    if (window.NoteEditor && typeof window.NoteEditor.open === "function") {
      const opts = { section: section || null, ...editorCallbacks(id, gen) };
      // The editor is drawn off-page and moved into the pane only while this is still the
      // note asked for: a slow load overtaken by Back or another note never covers the newer view.
      const staging = document.createElement("div");
      let handle;
      try {
        handle = await window.NoteEditor.open(staging, id, opts);
      } catch (err) {
        if (gen !== state.noteGen || (err && err.status === 401)) return;
        if (err && (err.status === 404 || err.status === 422)) { showMissing(); return; }
        delete pane.dataset.note;  // "Try again" opens it afresh
        pane.replaceChildren(h("div", { class: "empty-state", role: "alert" },
          h("p", { text: `This note could not be opened: ${err && err.message ? err.message : err}` }),
          h("p", {}, h("a", { href: noteUrl(id, section), text: "Try again" }))));
        return;
      }
      if (gen !== state.noteGen) { if (handle) { await handle.flush(); handle.close(); } return; }
      if (handle) {
        // The editor's title is a field: the page's h1 says it for screen readers.
        const field = staging.querySelector(".ne-title");
        const heading = field ? [h("h1", { id: "note-heading", class: "sr-only", text: field.value || "(untitled)" })] : [];
        pane.replaceChildren(...heading, ...staging.childNodes);
      }
      state.handle = handle;
      return;
    }
    await showReadOnly(id, section, gen);
  }

  function showMissing() {
    const pane = $("note-pane");
    document.title = "No such note · noteloom";
    pane.replaceChildren(h("div", { class: "empty-state missing", role: "alert" },
      h("h1", { id: "note-title", text: "This note does not exist or you cannot see it" }),
      h("p", { text: "It may have been moved to the trash, or it belongs to a notebook that is not shared with you." }),
      h("p", {}, h("a", { href: listUrl(state.list), text: "Back to the notes" }))));
  }

  async function showReadOnly(id, section, gen) {
    let note;
    try {
      note = await NL.api("GET", `/api/v1/notes/${encodeURIComponent(id)}/rendered`);
    } catch (err) {
      if (gen !== state.noteGen || err.status === 401) return;
      if (err.status === 404 || err.status === 422) { showMissing(); return; }
      throw err;
    }
    if (gen !== state.noteGen) return;
    document.title = `${note.title || "(untitled)"} · noteloom`;
    const meta = h("p", { class: "meta", id: "note-meta" }, "Updated ", h("time", { text: NL.when(note.updated_time) }));
    if (note.tags.length) meta.append(" · tags: ", ...note.tags.map((t) => h("span", { class: "tag", text: t })));
    if (note.is_todo) meta.append(` · ${note.todo_completed ? "done" : "to-do"}` + (note.todo_due ? `, due ${NL.when(note.todo_due)}` : ""));
    // The server sends source_url only when it is an http, https or mailto URL; the check
    // is repeated here so that nothing else can ever become a link.
    if (note.source_url && /^(https?|mailto):/i.test(note.source_url)) {
      meta.append(" · ", h("a", { href: note.source_url, rel: "noopener noreferrer nofollow", class: "source", text: "source" }));
    }
    const book = state.byId.get(note.notebook_id);
    const body = h("div", { class: "body nl-render", id: "note-body" });
    NL.setHtml(body, note.html);
    const linked = note.backlinks && note.backlinks.length ? h("nav", { class: "backlinks", id: "note-backlinks", "aria-labelledby": "note-backlinks-title" },
      h("h2", { id: "note-backlinks-title", text: "Linked from" }),
      h("ul", {}, ...note.backlinks.map((b) => h("li", {}, h("a", { href: noteUrl(b.id), text: b.title || "(untitled)" }))))) : null;
    const article = h("article", { class: "note" },
      h("div", { class: "note-head" },
        h("h1", { id: "note-title", text: note.title || "(untitled)" }),
        h("button", { type: "button", id: "note-move", onclick: () => askMove(id, note.title), text: "Move to…" })),
      book ? h("p", { class: "meta nb-of-note" }, "In ", h("a", { href: `/notebooks/${encodeURIComponent(book.id)}`, text: book.title })) : null,
      meta, body, linked);
    $("note-pane").replaceChildren(article);
    // Code highlighted, math drawn and task boxes wired in place (the links came resolved).
    if (window.NoteloomRender && typeof window.NoteloomRender.enhance === "function") {
      window.NoteloomRender.enhance(body, { noteId: id, updatedTime: note.updated_time, onError: report }).catch(report);
    }
    if (section) scrollToSection(section);
  }

  // The rendered view: bring the heading of `section` to the top of the note pane.
  function scrollToSection(section) {
    const want = section.trim();
    const heading = [...$("note-pane").querySelectorAll("h1, h2, h3, h4, h5, h6")]
      .find((el) => el.id !== "note-title" && el.textContent.trim() === want);
    if (!heading) return;
    heading.classList.add("section-target");
    heading.scrollIntoView({ block: "start" });
  }

  // -- actions ------------------------------------------------------------------------------

  function currentNotebook() {
    if (state.list && state.list.kind === "notebook") return state.list.notebookId;
    return null;
  }

  async function newNote() {
    const notebookId = currentNotebook();
    const body = { title: "Untitled" };
    if (notebookId) body.notebook_id = notebookId;
    const note = await NL.api("POST", "/api/v1/notes", body);
    loadTree().catch(report);
    const list = state.list && state.list.kind !== "search" ? state.list : { kind: "all", notebookId: null, q: "", mode: "" };
    if (state.list && state.list.kind !== "search") {
      const book = state.byId.get(note.notebook_id);
      const placeholder = $("notes").querySelector("li.empty");
      if (placeholder) placeholder.remove();
      const before = $("notes").firstChild;
      appendRows([{ ...note, notebook: book ? book.title : "", is_todo: false }]);
      const row = $("notes").lastChild;
      $("notes").insertBefore(row, before);
    }
    await go(noteUrl(note.id), { list });
    status(`Made a new note in ${(state.byId.get(note.notebook_id) || { title: "your notebook" }).title}.`);
  }

  let moving = null;
  function askMove(noteId, title) {
    moving = noteId;
    const select = $("move-select");
    const kids = childrenMap();
    const options = [];
    const walk = (parent, depth) => {
      for (const b of kids.get(parent) || []) {
        options.push(h("option", { value: b.id, text: `${"\u2003".repeat(depth)}${b.title}` }));
        walk(b.id, depth + 1);
      }
    };
    walk(null, 0);
    select.replaceChildren(...options);
    $("move-title").textContent = `Move “${title || "(untitled)"}” to…`;
    $("move-error").hidden = true;
    openDialog($("move-dialog"));
    select.focus();
  }

  async function doMove() {
    try {
      await moveNote(moving, $("move-select").value);
      $("move-dialog").close();
    } catch (err) {
      if (err.status === 401) return;
      $("move-error").textContent = err.message;
      $("move-error").hidden = false;
    }
  }

  // -- dialogs, drawers and keys ----------------------------------------------------------

  let returnFocus = null;
  function openDialog(dialog) {
    if (dialog.open) return;
    returnFocus = document.activeElement;
    dialog.showModal();
  }

  function wireDialogs() {
    for (const dialog of document.querySelectorAll("dialog.app-dialog")) {
      dialog.addEventListener("close", () => {
        if (returnFocus && document.contains(returnFocus)) returnFocus.focus();
        returnFocus = null;
      });
    }
    $("help-button").addEventListener("click", () => openDialog($("help-dialog")));
    $("move-go").addEventListener("click", () => doMove());
    $("move-cancel").addEventListener("click", () => $("move-dialog").close());
  }

  // The quick switcher: notes by title, arrow keys through the list, Enter opens.
  let switcherGen = 0;
  function openSwitcher() {
    const input = $("switcher-input");
    input.value = "";
    openDialog($("switcher"));
    input.focus();
    fillSwitcher("").catch(report);
  }

  // One request at a time: keys typed while one runs are asked for together when it ends
  // (a title search reads every title, a tenth of a second at 100,000 notes).
  let switcherBusy = false;
  let switcherNext = null;
  let switcherIdle = Promise.resolve();
  function fillSwitcher(text) {
    switcherNext = text;
    if (!switcherBusy) {
      switcherBusy = true;
      switcherIdle = (async () => {
        try {
          while (switcherNext !== null) {
            const t = switcherNext;
            switcherNext = null;
            await showTitles(t);
          }
        } finally {
          switcherBusy = false;
          switcherNext = null;
        }
      })();
    }
    return switcherIdle;
  }

  async function showTitles(text) {
    const gen = ++switcherGen;
    const data = await NL.api("GET", `/api/v1/browse/titles?${new URLSearchParams({ q: text.slice(0, 200) })}`);
    if (gen !== switcherGen || !$("switcher").open) return;
    const list = $("switcher-list");
    list.replaceChildren(...data.notes.map((n, i) => h("li", {
      role: "option", id: `switch-${i}`, "data-id": n.id, "aria-selected": i === 0 ? "true" : "false",
      onclick: () => switchTo(n.id),
    }, h("span", { class: "sw-title", text: n.title || "(untitled)" }), h("span", { class: "nb", text: n.notebook }))));
    if (!data.notes.length) list.append(h("li", { class: "empty", text: "No note has that in its title." }));
    activate(0);
  }

  function options() { return [...$("switcher-list").querySelectorAll("[role=option]")]; }

  function activate(i) {
    const opts = options();
    const input = $("switcher-input");
    if (!opts.length) { input.removeAttribute("aria-activedescendant"); return; }
    const k = (i + opts.length) % opts.length;
    opts.forEach((o, j) => o.setAttribute("aria-selected", j === k ? "true" : "false"));
    input.setAttribute("aria-activedescendant", opts[k].id);
    opts[k].scrollIntoView({ block: "nearest" });
  }

  function switchTo(id) {
    $("switcher").close();
    go(noteUrl(id)).catch(report);
  }

  function wireSwitcher() {
    const input = $("switcher-input");
    input.addEventListener("input", () => fillSwitcher(input.value).catch(report));
    input.addEventListener("keydown", (e) => {
      const opts = options();
      const at = opts.findIndex((o) => o.getAttribute("aria-selected") === "true");
      if (e.key === "ArrowDown") { e.preventDefault(); activate(at + 1); }
      else if (e.key === "ArrowUp") { e.preventDefault(); activate(at - 1); }
      else if (e.key === "Enter") {
        e.preventDefault();
        // Enter typed before the titles of the last keys came back waits for them.
        switcherIdle.then(() => {
          const now = options();
          const k = now.findIndex((o) => o.getAttribute("aria-selected") === "true");
          if (k >= 0 && $("switcher").open) switchTo(now[k].dataset.id);
        }, () => {});
      }
    });
  }

  function drawerButton(id) { return id === "tree-pane" ? $("toggle-tree") : $("toggle-list"); }

  // A phone's open drawer keeps the keyboard: Tab cycles inside it, Escape closes it and puts
  // the focus back on its button (NL.trapFocus, session.js).
  let releaseTrap = null;

  function openDrawer(id) {
    closeDrawers();
    $(id).classList.add("open");
    releaseTrap = NL.trapFocus($(id), { onEscape: () => closeDrawers({ focus: true }) });
    drawerButton(id).setAttribute("aria-expanded", "true");
    $("drawer-scrim").hidden = false;
    window.dispatchEvent(new CustomEvent("noteloom:drawer-open", { detail: { id } }));
    // Its first link or button; the drawer itself while it has none yet (the tree still loading).
    const first = $(id).querySelector("a, button");
    if (first) first.focus();
    else { $(id).setAttribute("tabindex", "-1"); $(id).focus(); }
  }

  function closeDrawers({ focus = false } = {}) {
    let was = null;
    if (releaseTrap) { releaseTrap(); releaseTrap = null; }
    for (const id of ["tree-pane", "list-pane"]) {
      if ($(id).classList.contains("open")) was = id;
      $(id).classList.remove("open");
    }
    $("drawer-scrim").hidden = true;
    if (PHONE.matches) {
      $("toggle-tree").setAttribute("aria-expanded", "false");
      $("toggle-list").setAttribute("aria-expanded", "false");
    }
    if (focus && was) drawerButton(was).focus();
    return was !== null;
  }

  function syncTreeButton() {
    if (PHONE.matches) {
      $("toggle-tree").setAttribute("aria-expanded", String($("tree-pane").classList.contains("open")));
      $("toggle-list").setAttribute("aria-expanded", String($("list-pane").classList.contains("open")));
    } else {
      closeDrawers();
      $("toggle-tree").setAttribute("aria-expanded", String(!$("app").classList.contains("tree-hidden")));
    }
  }

  function toggleTree() {
    if (PHONE.matches) {
      if ($("tree-pane").classList.contains("open")) closeDrawers({ focus: true });
      else openDrawer("tree-pane");
      return;
    }
    const hidden = $("app").classList.toggle("tree-hidden");
    localStorage.setItem(TREE_HIDDEN_KEY, hidden ? "1" : "");
    syncTreeButton();
  }

  function typingIn(el) {
    if (!el || el === document.body) return false;
    return el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName) || !!el.closest(".cm-editor, [contenteditable]");
  }

  function focusSearch() {
    closeDrawers();
    $("search-input").focus();
    $("search-input").select();
  }

  async function save() {
    if (!state.handle) { status("Nothing to save: no note is open in the editor."); return; }
    try {
      await state.handle.flush();
      status("Saved.");
    } catch (err) {
      report(err);
    }
  }

  function onKey(e) {
    if (document.querySelector("dialog[open]")) return;  // a dialog has its own keys
    const key = e.key.length === 1 ? e.key.toLowerCase() : e.key;
    if ((e.ctrlKey || e.metaKey) && !e.altKey) {
      const act = { k: focusSearch, p: openSwitcher, s: save, "\\": toggleTree }[key];
      if (act) { e.preventDefault(); act(); }
      return;
    }
    if (e.altKey && !e.ctrlKey && !e.metaKey && (key === "n" || e.code === "KeyN")) {
      e.preventDefault();
      newNote().catch(report);
      return;
    }
    if (key === "Escape" && closeDrawers({ focus: true })) { e.preventDefault(); return; }
    if (typingIn(e.target) || e.altKey) return;
    if (key === "/") { e.preventDefault(); focusSearch(); }
    else if (key === "?") { e.preventDefault(); openDialog($("help-dialog")); }
  }

  // Links to the app's own views change the view in place (and keep the history).
  function onClick(e) {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    const moveButton = e.target.closest && e.target.closest("button.row-move");
    if (moveButton) {
      const li = moveButton.closest("li");
      askMove(li.dataset.id, li.dataset.title);
      return;
    }
    const a = e.target.closest && e.target.closest("a[href]");
    if (!a || a.target || a.hasAttribute("download") || a.dataset.attachment) return;
    const url = new URL(a.href, location.href);
    if (url.origin !== location.origin || !/^\/($|notes\/|notebooks\/|search$)/.test(url.pathname)) return;
    if (url.pathname === location.pathname && url.search === location.search && url.hash) return;  // an anchor
    e.preventDefault();
    const inList = a.closest("#list-pane");
    go(url.pathname + url.search + url.hash, { list: inList || a.closest("#note-pane") ? state.list : null }).catch(report);
  }

  function wire() {
    document.addEventListener("keydown", onKey);
    document.addEventListener("click", onClick);
    $("notes").addEventListener("dragstart", (e) => {
      const li = e.target.closest && e.target.closest("li[data-id]");
      if (!li) return;
      e.dataTransfer.setData(NOTE_DRAG, li.dataset.id);
      e.dataTransfer.setData("text/plain", li.dataset.title);
      e.dataTransfer.effectAllowed = "move";
    });
    wireDrops();
    wireDialogs();
    wireSwitcher();
    $("load-more").addEventListener("click", () => loadMore().catch(report));
    $("search-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const q = $("search-input").value.trim();
      if (!q) return;
      const mode = $("search-mode").value;
      go(listUrl({ kind: "search", q, mode })).catch(report);
    });
    $("new-note").addEventListener("click", () => newNote().catch(report));
    $("toggle-tree").addEventListener("click", toggleTree);
    $("toggle-list").addEventListener("click", () => {
      if ($("list-pane").classList.contains("open")) closeDrawers({ focus: true });
      else openDrawer("list-pane");
    });
    $("drawer-scrim").addEventListener("click", () => closeDrawers({ focus: true }));
    if (localStorage.getItem(TREE_HIDDEN_KEY)) $("app").classList.add("tree-hidden");
    PHONE.addEventListener("change", syncTreeButton);
    syncTreeButton();
  }

  // For the AI sidebar (sidebar.js): a phone shows one drawer at a time.
  window.NoteloomApp = { closeDrawers };

  // The address a browser was refused before signing in (the 401 page's Sign in is
  // /?next=ADDRESS): a path of this server only, never a scheme, a host ("//evil", "/\\evil":
  // a backslash reads as a slash) or a control character. null when there is none to go to.
  function nextAddress() {
    const next = new URLSearchParams(location.search).get("next");
    if (!next || !next.startsWith("/") || next.startsWith("//") || next.includes("\\") || /[\u0000-\u001f\u007f]/.test(next)) return null;
    const url = new URL(next, location.origin);
    if (url.origin !== location.origin) return null;
    const there = url.pathname + url.search + url.hash;
    return there === location.pathname + location.search + location.hash ? null : there;
  }

  // Once signed in, on to that address: an attachment is fetched with the sign-in and shown
  // (a navigation carries none); anything else is opened. Returns whether the page leaves.
  function goNext() {
    const next = nextAddress();
    if (next === null) {
      if (new URLSearchParams(location.search).has("next")) history.replaceState(history.state, "", location.pathname);
      return false;
    }
    const file = /^\/attachments\/([0-9a-f]{32})$/.exec(next.split(/[?#]/)[0]);
    if (!file) { location.replace(next); return true; }
    NL.attachmentUrl(file[1]).then((url) => location.replace(url),
      (err) => status(`The attachment could not be opened: ${err.message}`));
    history.replaceState(history.state, "", location.pathname);
    return false;
  }

  NL.start(() => {
    if (goNext()) return;
    wire();
    if (window.NoteloomSidebar) window.NoteloomSidebar.start();
    const route = parseRoute();
    if (!history.state) history.replaceState({ list: listOf(route) || { kind: "all", notebookId: null, q: "", mode: "" } }, "", location.href);
    // The list's first page goes first: the tree counts every note (a tenth of a second or
    // more at 100,000), and the server may answer one read at a time.
    const shown = show();
    const tree = (state.loading || Promise.resolve()).catch(() => {}).then(loadTree);
    Promise.all([shown, tree]).catch((err) => {
      report(err);
      if (err.status !== 401) $("main").append(h("p", { class: "form-error", role: "alert", text: err.message }));
    });
  });
})();
