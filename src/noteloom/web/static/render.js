// NoteloomRender: Markdown in the page, as the server renders it (web/render.py), made live.
//
//   NoteloomRender.render(markdown) -> string
//       Sanitised HTML, the server's output without a resolver: :/ID and [[Title]] links
//       pending (data-joplin-id / data-wikilink, no href), math as source, code unhighlighted.
//   NoteloomRender.renderInto(el, markdown, {noteId, updatedTime, onToggleTask, onNoteChanged,
//                                            onError}) -> Promise<void>
//       Renders into `el`, highlights code, renders math with KaTeX (loaded on first use),
//       draws ```mermaid fences as diagrams (mermaid loaded on first use, see below),
//       resolves links as the signed-in person (POST /api/v1/links/resolve) and makes task
//       checkboxes clickable: with `noteId` a click saves the toggle (POST
//       /api/v1/notes/{noteId}/tasks, 409 if the note changed since `updatedTime`) and calls
//       onNoteChanged(note) (the note as the API answers it; its updated_time becomes the next
//       base); a refused save (409 changed since, 403 read share, 422 not a task) puts the box
//       back and calls onError(err) (err.status). Without noteId, a click calls
//       onToggleTask(line, done) (line: 0-based in the body, as `data-line`). Without either,
//       checkboxes stay disabled. Checkboxes are named by their item's text; `el` gets the
//       class nl-render (render.css).
//   NoteloomRender.renderStreaming(el, markdownSoFar) -> Promise<void>
//       For text still growing (a chat reply): at most one render per animation frame (the
//       latest text wins), sanitised every time. Finished blocks (before a blank line that a
//       new top-level block follows, outside fences) are rendered once and kept with their
//       highlighting and math; each frame renders only the rest, and keeps its blocks whose
//       HTML did not change. An unclosed fence is a code block to the end (a mermaid fence is
//       drawn once it is closed). Call renderInto
//       with the final text when it ends (that also resolves links). The promise resolves
//       once the frame that drew this text (or a later one) has run.
//   NoteloomRender.enhance(el, {noteId, updatedTime, onToggleTask, onNoteChanged, onError})
//                                            -> Promise<void>
//       For the server's HTML already in `el` (GET /api/v1/notes/{id}/rendered, links
//       resolved there): highlights, draws math, wires the task boxes as renderInto does.
//   NoteloomRender.ready -> Promise: the Markdown bundle and stylesheets are loaded.
//
// Diagrams: the server keeps a ```mermaid fence as code (exports keep the source); here each
// becomes a <figure class="nl-mermaid"> with the diagram, the code kept hidden in it. Mermaid
// (/static/vendor/mermaid/mermaid.min.js, 5 MB) is added as a script only when a page shows
// such a fence, set up with securityLevel "strict" (no click handlers, no HTML labels) and the
// app's light or dark theme (drawn again when it changes). Its SVG goes through DOMPurify's SVG
// profile (NoteloomMarkdown.sanitizeSvg) before it is inserted. A diagram that does not parse
// keeps its source in view with a short error under it.
//
// Needs /static/vendor/markdown/markdown.js (NoteloomMarkdown; loaded here when the page has
// not) and uses session.js's NL (the session header, attachments as blob: URLs) when present.
// Stylesheets (render.css, highlight.js themes for light and dark) are added on first use.
"use strict";

(() => {
  const BUNDLE = "/static/vendor/markdown/markdown.js";
  const KATEX_JS = "/static/vendor/katex/katex.min.js";
  const KATEX_CSS = "/static/vendor/katex/katex.min.css";
  const HLJS_LIGHT = "/static/vendor/highlight/github.min.css";
  const HLJS_DARK = "/static/vendor/highlight/github-dark.min.css";
  const MERMAID_JS = "/static/vendor/mermaid/mermaid.min.js";
  // A streamed top-level node's key: the sanitised HTML it was made from (see patchFrom).
  const sourceOf = new WeakMap();
  const SESSION_HEADER = "X-Noteloom-Session";

  function addScript(src) {
    const found = document.querySelector(`script[src="${src}"]`);
    if (found && found.dataset.loaded) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const s = found || document.createElement("script");
      s.addEventListener("load", () => { s.dataset.loaded = "1"; resolve(); });
      s.addEventListener("error", () => reject(new Error(`could not load ${src}`)));
      if (!found) { s.src = src; document.head.append(s); }
    });
  }

  function addStyle(href, id) {
    let link = document.querySelector(`link[href="${href}"]`);
    if (!link) {
      link = document.createElement("link");
      link.rel = "stylesheet";
      link.href = href;
      if (id) link.id = id;
      document.head.append(link);
    }
    return link;
  }

  // The highlight.js theme follows the app's theme: html[data-theme] when set, else the OS.
  const darkQuery = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;
  function isDark() {
    const set = document.documentElement.dataset.theme;
    return set ? set === "dark" : Boolean(darkQuery && darkQuery.matches);
  }
  let themes = null;
  function syncTheme() {
    if (!themes) return;
    // By media, not `disabled`: a <link> disabled before its sheet has loaded may still apply.
    const dark = isDark();
    themes.light.media = dark ? "not all" : "all";
    themes.dark.media = dark ? "all" : "not all";
    redrawDiagrams();
  }
  function addStyles() {
    if (themes) return;
    addStyle("/static/render.css");
    themes = { light: addStyle(HLJS_LIGHT, "nl-hljs-light"), dark: addStyle(HLJS_DARK, "nl-hljs-dark") };
    syncTheme();
    if (darkQuery && darkQuery.addEventListener) darkQuery.addEventListener("change", syncTheme);
    new MutationObserver(syncTheme).observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
  }

  const ready = (window.NoteloomMarkdown ? Promise.resolve() : addScript(BUNDLE)).then(() => {
    if (document.readyState === "loading") {
      return new Promise((resolve) => document.addEventListener("DOMContentLoaded", () => { addStyles(); resolve(); }));
    }
    addStyles();
    return undefined;
  });

  let katexLoading = null;
  function loadKatex() {
    if (window.katex) return Promise.resolve(window.katex);
    if (!katexLoading) {
      addStyle(KATEX_CSS);
      katexLoading = addScript(KATEX_JS).then(() => window.katex);
    }
    return katexLoading;
  }

  // Mermaid: loaded and set up on first use, set up again when the theme changes.
  let mermaidLoading = null;
  let mermaidTheme = null;
  let diagramCount = 0;
  // Mermaid's SVG by theme and source, so a preview drawn again after each pause in typing (or
  // a streamed reply drawn whole at its end) shows a diagram it has already drawn at once.
  const diagramCache = new Map();
  const DIAGRAM_CACHE_MAX = 50;
  async function diagramSvg(mermaid, id, source) {
    const key = `${mermaidTheme}\n${source}`;
    let svg = diagramCache.get(key);
    if (svg === undefined) {
      svg = (await mermaid.render(id, source)).svg;
      diagramCache.set(key, svg);
      if (diagramCache.size > DIAGRAM_CACHE_MAX) diagramCache.delete(diagramCache.keys().next().value);
    }
    return svg;
  }
  function loadMermaid() {
    if (!mermaidLoading) mermaidLoading = addScript(MERMAID_JS).then(() => window.mermaid);
    return mermaidLoading.then((mermaid) => {
      const theme = isDark() ? "dark" : "default";
      if (mermaidTheme !== theme) {
        mermaid.initialize({ startOnLoad: false, securityLevel: "strict", theme, htmlLabels: false,
          flowchart: { htmlLabels: false }, suppressErrorRendering: true });
        mermaidTheme = theme;
      }
      return mermaid;
    });
  }

  function diagramError(err) {
    const text = String((err && (err.message || err.str)) || err || "unknown error").trim();
    const first = text.split("\n").find((line) => line.trim()) || "unknown error";
    return first.length > 160 ? `${first.slice(0, 157)}...` : first;
  }

  // The fences of `root` to draw: every pre > code.language-mermaid not yet taken, except
  // `open` (the last <pre> of a streaming reply whose fence is still open).
  function mermaidBlocks(root, open) {
    return [...root.querySelectorAll("pre > code.language-mermaid")]
      .map((code) => code.parentElement)
      .filter((pre) => pre !== open && !pre.closest(".nl-mermaid"));
  }

  // Each block into a <figure class="nl-mermaid"> (the top-level node keeps the streaming key of
  // the <pre> it replaces, so a later frame with the same text keeps the diagram).
  async function drawDiagrams(root, open = null) {
    const blocks = mermaidBlocks(root, open);
    if (!blocks.length) return;
    const figures = blocks.map((pre) => {
      const figure = document.createElement("figure");
      figure.className = "nl-mermaid";
      figure.dataset.mermaid = "pending";
      if (sourceOf.has(pre)) sourceOf.set(figure, sourceOf.get(pre));
      pre.replaceWith(figure);
      figure.append(pre);
      return figure;
    });
    let mermaid;
    try {
      mermaid = await loadMermaid();
    } catch (err) {
      for (const figure of figures) showDiagramError(figure, err);
      return;
    }
    for (const figure of figures) await drawDiagram(mermaid, figure);
  }

  async function drawDiagram(mermaid, figure) {
    const pre = figure.querySelector(":scope > pre");
    const source = pre.textContent;
    const id = `nl-mermaid-${++diagramCount}`;
    // What mermaid may leave in the page on a failure (its SVG, the box it drew it in): named
    // by this id, so removed before the diagram (whose <svg> has the id) goes in.
    const leftovers = () => { document.getElementById(id)?.remove(); document.getElementById(`d${id}`)?.remove(); };
    try {
      const svg = await diagramSvg(mermaid, id, source);
      leftovers();
      const clean = window.NoteloomMarkdown.sanitizeSvg(svg);
      if (!clean.querySelector("svg")) throw new Error("the diagram came out empty");
      for (const old of figure.querySelectorAll(":scope > svg, :scope > .nl-mermaid-error")) old.remove();
      pre.hidden = true;
      figure.prepend(clean);
      figure.dataset.mermaid = "drawn";
      figure.dataset.drawnTheme = mermaidTheme;
    } catch (err) {
      leftovers();
      showDiagramError(figure, err);
    }
  }

  function showDiagramError(figure, err) {
    for (const old of figure.querySelectorAll(":scope > svg, :scope > .nl-mermaid-error")) old.remove();
    const pre = figure.querySelector(":scope > pre");
    pre.hidden = false;
    const message = document.createElement("p");
    message.className = "nl-mermaid-error";
    message.textContent = `Diagram not drawn: ${diagramError(err)}`;
    figure.append(message);
    figure.dataset.mermaid = "error";
  }

  // The theme changed: the diagrams already drawn are drawn again in the other one.
  let redrawing = null;
  function redrawDiagrams() {
    if (!mermaidLoading || redrawing) return;
    redrawing = loadMermaid().then(async (mermaid) => {
      for (const figure of document.querySelectorAll(".nl-mermaid[data-mermaid='drawn']")) {
        if (figure.dataset.drawnTheme !== mermaidTheme) await drawDiagram(mermaid, figure);
      }
    }).catch(() => {}).finally(() => { redrawing = null; });
  }

  async function api(method, path, body) {
    if (window.NL && window.NL.api) return window.NL.api(method, path, body);
    const headers = { "Content-Type": "application/json" };
    const session = sessionStorage.getItem("noteloom.session");
    if (session) headers[SESSION_HEADER] = session;
    const res = await fetch(path, { method, headers, body: JSON.stringify(body), credentials: "omit" });
    const data = await res.json().catch(() => ({}));
    if (!res.ok) {
      const err = new Error(data.message || `${res.status} ${res.statusText}`);
      err.status = res.status;
      err.data = data;
      throw err;
    }
    return data;
  }

  function render(markdown) {
    if (!window.NoteloomMarkdown) throw new Error("NoteloomRender.render: the Markdown bundle is not loaded yet (await NoteloomRender.ready)");
    return window.NoteloomMarkdown.render(markdown);
  }

  // Sanitised HTML into `el` (images of attachments fetched with the session: NL.setHtml).
  function setHtml(el, html) {
    if (window.NL && window.NL.setHtml) { window.NL.setHtml(el, html); return; }
    el.innerHTML = html;
  }

  // Attachments need the session header, which <img src> cannot send (NL.attachmentUrl).
  function attachImages(root) {
    if (!window.NL || !window.NL.attachmentUrl) return;
    for (const img of root.querySelectorAll("img[src^='/attachments/']")) {
      const id = img.getAttribute("src").slice("/attachments/".length);
      img.removeAttribute("src");
      window.NL.attachmentUrl(id).then((url) => { img.src = url; }, () => { img.alt = `${img.alt || "image"} (unavailable)`; });
    }
  }

  async function renderMath(root) {
    const nodes = root.querySelectorAll(".math-inline:not([data-rendered]), .math-display:not([data-rendered])");
    if (!nodes.length) return;
    let katex;
    try { katex = await loadKatex(); } catch { return; }  // the source stays readable
    for (const node of nodes) {
      if (node.dataset.rendered) continue;  // drawn by another call while KaTeX was loading
      const tex = node.textContent;
      node.dataset.rendered = "1";
      node.dataset.tex = tex;
      try {
        katex.render(tex, node, { displayMode: node.classList.contains("math-display"), throwOnError: false });
      } catch {
        node.textContent = tex;
      }
    }
  }

  function unresolve(node) {
    node.classList.add("link-unresolved");
    node.removeAttribute("href");
    if (node.tagName === "IMG") node.removeAttribute("src");
    node.title = node.title || "No note you can open is linked here";
  }

  async function resolveLinks(root) {
    // Only what is still pending (the server's HTML comes with its links resolved).
    const byId = [...root.querySelectorAll("a[data-joplin-id]:not([href]):not(.link-unresolved), img[data-joplin-id]:not(.link-unresolved)")];
    const byTitle = [...root.querySelectorAll("a[data-wikilink]:not([href]):not(.link-unresolved)")];
    if (!byId.length && !byTitle.length) return;
    const ids = [...new Set(byId.map((n) => n.dataset.joplinId))];
    const titles = [...new Set(byTitle.map((n) => n.dataset.wikilink))];
    let found;
    try {
      found = await api("POST", "/api/v1/links/resolve", { ids, titles });
    } catch {
      return;  // left pending (not followed anywhere) rather than wrongly unresolved
    }
    const notes = new Set(found.notes);
    const files = new Set(found.attachments);
    for (const node of byId) {
      const id = node.dataset.joplinId;
      if (node.tagName === "IMG") {
        if (!files.has(id)) unresolve(node);
      } else if (notes.has(id)) {
        node.setAttribute("href", `/notes/${id}`);
      } else if (files.has(id)) {
        node.setAttribute("href", `/attachments/${id}`);
        node.dataset.attachment = id;
      } else {
        unresolve(node);
      }
    }
    for (const node of byTitle) {
      const id = found.titles[node.dataset.wikilink];
      if (id) node.setAttribute("href", `/notes/${id}`);
      else unresolve(node);
    }
  }

  // A checkbox is named by its item's text (a screen reader, and axe, want a name).
  function labelTasks(root) {
    for (const box of root.querySelectorAll("li.task-list-item > input.task-list-item-checkbox")) {
      const text = box.closest("li").textContent.trim().replace(/\s+/g, " ").slice(0, 80);
      box.setAttribute("aria-label", `Done: ${text || "task"}`);
    }
  }

  function wireTasks(el, opts) {
    labelTasks(el);
    const clickable = Boolean(opts.noteId || opts.onToggleTask);
    const state = { updatedTime: opts.updatedTime };
    for (const box of el.querySelectorAll("li.task-list-item[data-line] > input.task-list-item-checkbox")) {
      if (!clickable) continue;
      box.disabled = false;
      const item = box.closest("li");
      box.addEventListener("change", async () => {
        const line = Number(item.dataset.line);
        const done = box.checked;
        if (!opts.noteId) { opts.onToggleTask(line, done); return; }
        box.disabled = true;
        try {
          const body = { line, done };
          if (state.updatedTime !== undefined && state.updatedTime !== null) body.base_updated_time = state.updatedTime;
          const note = await api("POST", `/api/v1/notes/${opts.noteId}/tasks`, body);
          state.updatedTime = note.updated_time;
          if (opts.onNoteChanged) opts.onNoteChanged(note);
        } catch (err) {
          box.checked = !done;
          if (opts.onError) opts.onError(err);
        } finally {
          box.disabled = false;
        }
      });
    }
  }

  async function renderInto(el, markdown, opts = {}) {
    await ready;
    const pending = el.__nlStream;
    if (pending) pending.text = null;  // a streaming frame still queued must not overwrite this
    el.__nlStream = null;
    el.classList.add("nl-render");
    setHtml(el, render(markdown));
    window.NoteloomMarkdown.highlight(el);
    wireTasks(el, opts);
    await Promise.all([renderMath(el), resolveLinks(el), drawDiagrams(el)]);
  }

  // The server's HTML (GET /api/v1/notes/{id}/rendered, links resolved) already in `el`:
  // the same as renderInto does after rendering, without rendering again.
  async function enhance(el, opts = {}) {
    await ready;
    el.classList.add("nl-render");
    window.NoteloomMarkdown.highlight(el);
    wireTasks(el, opts);
    await Promise.all([renderMath(el), resolveLinks(el), drawDiagrams(el)]);
  }

  // Streaming: the latest text per element, rendered once per frame. The text is cut where
  // a new top-level block starts after a blank line outside any fence or $$ block: what comes
  // before such a cut is finished, so it is rendered once and left alone (its highlighting and
  // math too); each frame renders only the rest. Each part is sanitised on its own and placed
  // as DOM nodes, never joined as strings. The final renderInto renders the whole again
  // (a reference definition that comes late, say, then applies to earlier blocks).
  function renderStreaming(el, markdownSoFar) {
    let stream = el.__nlStream;
    if (!stream) {
      stream = { text: null, frame: null, waiting: [], stable: "", stableCount: 0 };
      el.__nlStream = stream;
      el.replaceChildren();
      el.classList.add("nl-render");
    }
    stream.text = String(markdownSoFar ?? "");
    return new Promise((resolve) => {
      stream.waiting.push(resolve);
      if (stream.frame !== null) return;
      stream.frame = requestAnimationFrame(() => {
        stream.frame = null;
        const waiting = stream.waiting.splice(0);
        if (stream.text !== null && window.NoteloomMarkdown) streamFrame(el, stream);
        else if (stream.text !== null) ready.then(() => renderStreaming(el, stream.text));
        for (const done of waiting) done();
      });
    });
  }

  function streamFrame(el, stream) {
    const text = stream.text;
    if (!text.startsWith(stream.stable)) {  // replaced, not grown: start again
      stream.stable = "";
      stream.stableCount = 0;
    }
    const scan = scanBlocks(text);
    const cut = scan.cut;
    if (cut > stream.stable.length) {
      stream.stableCount += patchFrom(el, stream.stableCount, render(text.slice(stream.stable.length, cut)));
      stream.stable = text.slice(0, cut);
    }
    patchFrom(el, stream.stableCount, render(text.slice(stream.stable.length)));
    renderMath(el);
    // A fence still open at the end is the last block: its diagram waits for the closing line.
    drawDiagrams(el, scan.fence !== null ? [...el.querySelectorAll("pre")].pop() : null);
  }

  const FENCE = /^ {0,3}(`{3,}|~{3,})/;
  const MATH = /^ {0,3}\$\$/;

  // Where the last top-level block that starts after a blank line begins (cut; 0: nowhere yet),
  // and the fence the text ends inside (fence; null: none). Only whole lines count: the last one
  // may still be growing (a closing fence counts once its line has ended).
  function scanBlocks(text) {
    const lines = text.split("\n");
    let pos = 0;
    let cut = 0;
    let fence = null;
    let blank = false;
    for (let i = 0; i < lines.length - 1; i++) {
      const line = lines[i];
      if (fence === "$$") {
        if (line.trimEnd().endsWith("$$")) fence = null;
      } else if (fence) {
        const m = FENCE.exec(line);
        if (m && m[1][0] === fence[0] && m[1].length >= fence.length && line.trim() === m[1]) fence = null;
      } else {
        const opens = FENCE.exec(line);
        const math = MATH.test(line);
        if (blank && (opens || math || /^[\p{L}\p{N}#]/u.test(line)) && !/^\d+[.)]/.test(line)) cut = pos;
        if (opens) fence = opens[1];
        else if (math) {  // as render.py's _math_block: "$$...$$" on one line closes itself
          const rest = line.slice(line.indexOf("$$") + 2);
          if (!(rest.trimEnd().endsWith("$$") && rest.trim() !== "")) fence = "$$";
        }
      }
      blank = fence === null && line.trim() === "";
      pos += line.length + 1;
    }
    return { cut, fence };
  }

  // Make el's children from index `start` on into `html`'s top-level nodes, keeping those that
  // are already the same (same sanitised HTML, or the same text) and dropping everything after
  // the first that is not. Answers how many nodes `html` made.
  const keyOf = (node) => (node.nodeType === 1 ? sourceOf.get(node) : `#${node.nodeType}:${node.data}`);
  const keyOfNew = (node) => (node.nodeType === 1 ? node.outerHTML : `#${node.nodeType}:${node.data}`);
  function patchFrom(el, start, html) {
    const tpl = document.createElement("template");
    tpl.innerHTML = html;
    const next = [...tpl.content.childNodes];
    const prev = [...el.childNodes].slice(start);
    let same = 0;
    while (same < next.length && same < prev.length && keyOf(prev[same]) === keyOfNew(next[same])) same++;
    for (const old of prev.slice(same)) old.remove();
    const added = next.slice(same);
    for (const node of added) if (node.nodeType === 1) sourceOf.set(node, node.outerHTML);
    const box = document.createElement("template");
    box.content.append(...added);
    window.NoteloomMarkdown.highlight(box.content);
    attachImages(box.content);
    labelTasks(box.content);
    el.append(box.content);
    return next.length;
  }

  window.NoteloomRender = { render, renderInto, renderStreaming, enhance, ready };
})();
