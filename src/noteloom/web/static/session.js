// Signing in, and every request the pages make. Shared by all pages; no inline script.
//
// The credential is a session token kept in sessionStorage, which is scoped to this
// scheme, host AND port, and sent as a header. Never a cookie: browsers send a host's
// cookies to every port of it, so any other local server would receive them, and a form
// it posts here would carry them. A header is only ever added by this script.
//
// Signing in: a person gives their name and password, which this script posts as JSON for
// a session token. The owner's first sign-in is the link `noteloom serve` prints, with
// ?token= (#token= works too and never reaches the server): this script takes the token
// out of the address bar and history at once (history.replaceState), then trades it the
// same way. Without a session, or after any 401, the page shows the sign-in form (name and
// password, or paste the token). The inputs have no name attribute, so a form submitted
// without this script sends nothing anywhere.
"use strict";

(() => {
  const KEY = "noteloom.session";
  const HEADER = "X-Noteloom-Session";
  const $ = (id) => document.getElementById(id);
  let signedIn = null;       // resolves once a session is known
  let resolveSignedIn = null;
  let started = false;       // the page's own script has run (a later 401 reloads it)

  const session = () => sessionStorage.getItem(KEY);

  class ApiError extends Error {
    constructor(message, status, data) { super(message); this.status = status; this.data = data; }
  }

  function takeTokenFromUrl() {
    const url = new URL(location.href);
    const hash = new URLSearchParams(url.hash.replace(/^#/, ""));
    const token = url.searchParams.get("token") || hash.get("token");
    if (!token) return null;
    url.searchParams.delete("token");
    if (hash.has("token")) { hash.delete("token"); url.hash = hash.toString(); }
    history.replaceState(history.state, "", url.pathname + url.search + url.hash);
    return token;
  }

  // `credential`: { token } or { name, password }.
  async function exchange(credential) {
    const res = await fetch("/api/v1/auth/sign-in", {
      method: "POST", credentials: "omit", cache: "no-store",
      headers: { "Content-Type": "application/json" }, body: JSON.stringify(credential),
    });
    const data = await res.json().catch(() => ({}));
    if (!res.ok) throw new ApiError(data.message || `sign-in failed (${res.status})`, res.status, data);
    sessionStorage.setItem(KEY, data.session);
  }

  function showApp(on) {
    for (const el of document.querySelectorAll("[data-app]")) el.hidden = !on;
    $("sign-in").hidden = on;
  }

  function showSignIn(message) {
    sessionStorage.removeItem(KEY);
    showApp(false);
    const box = $("sign-in-error");
    box.textContent = message || "";
    box.hidden = !message;
    $("sign-in-name").focus();
  }

  function ready() {
    showApp(true);
    if (resolveSignedIn) { resolveSignedIn(); resolveSignedIn = null; }
  }

  // fetch() with the session header; a 401 shows the sign-in form.
  async function authFetch(path, init = {}) {
    const headers = new Headers(init.headers || {});
    const s = session();
    if (s) headers.set(HEADER, s);
    const res = await fetch(path, { ...init, headers, credentials: "omit" });
    if (res.status === 401) {
      const data = await res.json().catch(() => ({}));
      showSignIn(data.message || "Your session has ended: sign in again.");
      throw new ApiError(data.message || "sign in again", 401, data);
    }
    return res;
  }

  async function api(method, path, body) {
    const init = { method, headers: {} };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const res = await authFetch(path, init);
    if (res.status === 204) return null;
    const type = res.headers.get("content-type") || "";
    const data = type.includes("json") ? await res.json() : await res.text();
    if (!res.ok) throw new ApiError((data && data.message) || `${res.status} ${res.statusText}`, res.status, data);
    return data;
  }

  // A date stored out of range (year 10000, garbage) must not break a page.
  function when(ms, style = "datetime") {
    if (ms === null || ms === undefined || ms === 0) return "";
    const d = new Date(Number(ms));
    const y = d.getUTCFullYear();
    if (!Number.isFinite(d.getTime()) || y < 1 || y > 9999) return "invalid date";
    const iso = d.toISOString();
    return style === "iso" ? iso : `${iso.slice(0, 10)} ${iso.slice(11, 16)}`;
  }

  // Attachments need the header, which <img src> cannot send: fetch them, show blob: URLs.
  const blobs = new Map();
  async function attachmentUrl(id) {
    if (!blobs.has(id)) {
      blobs.set(id, authFetch(`/attachments/${id}`).then(async (res) => {
        if (!res.ok) throw new ApiError(`attachment ${id} is not available (${res.status})`, res.status);
        return URL.createObjectURL(await res.blob());
      }));
    }
    return blobs.get(id);
  }

  const ATTACHMENT = /^\/attachments\/([0-9a-f]{32})$/;

  // Server-sanitised HTML into `el`. Parsed in an inert <template> first, so no image is
  // requested before its src is swapped for the blob: URL.
  function setHtml(el, html) {
    const tpl = document.createElement("template");
    tpl.innerHTML = html;
    for (const img of tpl.content.querySelectorAll("img[src^='/attachments/']")) {
      const m = ATTACHMENT.exec(img.getAttribute("src"));
      img.removeAttribute("src");
      if (m) {
        img.dataset.attachment = m[1];
        attachmentUrl(m[1]).then((url) => { img.src = url; }, () => { img.alt = `${img.alt || "image"} (unavailable)`; });
      }
    }
    for (const a of tpl.content.querySelectorAll("a[href^='/attachments/']")) {
      const m = ATTACHMENT.exec(a.getAttribute("href"));
      if (m) a.dataset.attachment = m[1];
    }
    el.replaceChildren(tpl.content);
  }

  // Links to attachments open the fetched file (a plain navigation would carry no header).
  document.addEventListener("click", async (e) => {
    const a = e.target.closest && e.target.closest("a[data-attachment]");
    if (!a || e.defaultPrevented) return;
    e.preventDefault();
    try { window.open(await attachmentUrl(a.dataset.attachment), "_blank", "noopener"); } catch { /* shown by the 401 view */ }
  });

  async function signOut() {
    try { await api("POST", "/api/v1/auth/sign-out"); } catch { /* ended anyway */ }
    showSignIn("Signed out.");
  }

  // Run `main` once signed in; after a later 401 and a new sign-in, the page starts afresh.
  function start(main) {
    signedIn.then(() => {
      if (started) { location.reload(); return; }
      started = true;
      main();
    });
  }

  function boot() {
    signedIn = new Promise((resolve) => { resolveSignedIn = resolve; });
    const submitted = (form, credential, inputs) => form.addEventListener("submit", async (e) => {
      e.preventDefault();
      try {
        await exchange(credential());
        for (const input of inputs) input.value = "";
        if (started) { location.reload(); return; }
        ready();
      } catch (err) {
        $("sign-in-password").value = "";
        showSignIn(err.message);
      }
    });
    submitted($("sign-in-password-form"),
      () => ({ name: $("sign-in-name").value.trim(), password: $("sign-in-password").value }),
      [$("sign-in-password")]);
    submitted($("sign-in-form"), () => ({ token: $("sign-in-token").value.trim() }), [$("sign-in-token")]);
    const out = $("sign-out");
    if (out) out.addEventListener("click", signOut);
    const token = takeTokenFromUrl();
    if (token) {
      exchange({ token }).then(ready, (err) => showSignIn(err.message));
    } else if (session()) {
      ready();
    } else {
      showSignIn("");
    }
  }

  // An element: attributes (text as textContent, never HTML; on* as listeners) and children.
  function h(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children) if (c !== null && c !== undefined) node.append(c);
    return node;
  }

  // A held call's description with the notes and notebooks it names by id written as the
  // server named them for this person (title and notebook, or "a note you cannot see").
  function actionName(n) {
    if (n.kind === "hidden") return "a note you cannot see";
    if (n.kind === "notebook") return `notebook “${n.title}”`;
    return n.notebook ? `“${n.title}” in ${n.notebook}` : `“${n.title}”`;
  }

  function actionDescription(pending) {
    let description = pending.description || "";
    for (const n of pending.names || []) description = description.replaceAll(`'${n.id}'`, n.id).replaceAll(n.id, actionName(n));
    return description;
  }


  // Keep the keyboard inside `container` (an open drawer) until the returned release() is
  // called: Tab and Shift+Tab cycle through its visible focusable elements, and Escape calls
  // `onEscape(event)` (the caller closes the drawer and puts the focus back where it was).
  // Traps stack: only the newest one answers; an open <dialog> is left to the browser, and a
  // key an element inside has handled already (preventDefault: Escape in an edit box) too.
  const traps = [];
  const FOCUSABLE = "a[href], button:not([disabled]), input:not([disabled]):not([type=hidden]), select:not([disabled]), " +
    "textarea:not([disabled]), summary, [contenteditable=''], [contenteditable=true], [tabindex]:not([tabindex='-1'])";

  function focusables(container) {
    return [...container.querySelectorAll(FOCUSABLE)].filter((el) =>
      el.getClientRects().length > 0 && getComputedStyle(el).visibility !== "hidden" && !el.closest("[inert], [hidden]") &&
      (!el.closest("details:not([open])") || el.matches("details > summary")));
  }

  function onTrapKey(e) {
    const trap = traps[traps.length - 1];
    if (!trap || e.defaultPrevented || document.querySelector("dialog[open]")) return;
    if (e.key === "Escape") {
      if (!trap.onEscape) return;
      e.preventDefault();
      trap.onEscape(e);
      return;
    }
    if (e.key !== "Tab" || e.altKey || e.ctrlKey || e.metaKey) return;
    const items = focusables(trap.container);
    const here = document.activeElement;
    let next;
    if (!items.length) {
      next = trap.container;
    } else if (!trap.container.contains(here) || here === trap.container) {
      next = e.shiftKey ? items[items.length - 1] : items[0];
    } else {
      // The neighbour in document order (the focus may sit on an element not in the list,
      // such as a card focused by script), wrapping round at either end.
      const after = (el) => here.compareDocumentPosition(el) & Node.DOCUMENT_POSITION_FOLLOWING;
      const i = items.indexOf(here);
      if (e.shiftKey) next = (i >= 0 ? items[i - 1] : items.filter((el) => !after(el)).pop()) || items[items.length - 1];
      else next = (i >= 0 ? items[i + 1] : items.find((el) => after(el))) || items[0];
    }
    e.preventDefault();
    if (next === trap.container && !next.hasAttribute("tabindex")) next.setAttribute("tabindex", "-1");
    next.focus();
  }

  function trapFocus(container, { onEscape } = {}) {
    const trap = { container, onEscape };
    if (!traps.length) document.addEventListener("keydown", onTrapKey);
    traps.push(trap);
    return function release() {
      const i = traps.indexOf(trap);
      if (i >= 0) traps.splice(i, 1);
      if (!traps.length) document.removeEventListener("keydown", onTrapKey);
    };
  }

  // A message's ‹ n/m › switcher between its versions (regenerated answers, edited
  // questions): `show(id)` shows another; `cls` prefixes the classes ("" on the chat page,
  // "ai-" in the sidebar).
  function branchSwitch(m, show, cls = "") {
    const b = m.branch;
    const what = m.role === "user" ? "question" : "answer";
    const to = (i) => () => show(b.ids[i - 1]);
    return h("span", { class: `${cls}branches`, role: "group", "aria-label": `Version ${b.index} of ${b.count} of this ${what}` },
      h("button", { type: "button", class: `${cls}branch-prev`, text: "‹", "aria-label": `Previous version of this ${what}`,
        disabled: b.index <= 1, onclick: to(b.index - 1) }),
      h("span", { class: `${cls}branch-count`, text: `${b.index}/${b.count}` }),
      h("button", { type: "button", class: `${cls}branch-next`, text: "›", "aria-label": `Next version of this ${what}`,
        disabled: b.index >= b.count, onclick: to(b.index + 1) }));
  }

  // Copy `text` to the clipboard from a Copy button, saying how it went on the button and to
  // screen readers (`say`: the page's polite status line).
  async function copyText(button, text, say) {
    try {
      await navigator.clipboard.writeText(text);
      button.textContent = "Copied";
      say("Copied to the clipboard.");
    } catch (err) {
      button.textContent = "Copy failed";
      say(`Could not copy: ${err.message}`);
    }
    setTimeout(() => { button.textContent = "Copy"; }, 4000);
  }

  window.NL = { api, authFetch, session, when, setHtml, attachmentUrl, start, h, actionName, actionDescription, trapFocus,
                branchSwitch, copyText, ApiError, HEADER };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", boot);
  else boot();
})();
