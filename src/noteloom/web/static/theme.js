// The colour theme: the person's choice (light or dark) or, by default, the system's.
//
// Loaded in every page's <head> without `defer`, so html[data-theme] is set before the first
// paint and a page chosen dark never flashes light. noteloom.css holds the two palettes; with
// no data-theme it follows prefers-color-scheme. Once the document is parsed, a switch
// (System / Light / Dark, buttons with aria-pressed behind one header button) goes into the
// page's header.top.
"use strict";

(() => {
  const KEY = "noteloom.theme";
  const CHOICES = [
    { value: "system", name: "System",
      icon: '<circle cx="12" cy="12" r="8"/><path d="M12 4a8 8 0 0 1 0 16z" fill="currentColor"/>' },
    { value: "light", name: "Light",
      icon: '<circle cx="12" cy="12" r="4"/><path d="M12 2v2M12 20v2M2 12h2M20 12h2M4.9 4.9l1.4 1.4M17.7 17.7l1.4 1.4M4.9 19.1l1.4-1.4M17.7 6.3l1.4-1.4"/>' },
    { value: "dark", name: "Dark",
      icon: '<path d="M20 14.5A8 8 0 0 1 9.5 4 8 8 0 1 0 20 14.5z"/>' },
  ];

  function stored() {
    try {
      const v = localStorage.getItem(KEY);
      return v === "light" || v === "dark" ? v : "system";
    } catch { return "system"; }  // storage disabled: the system's theme
  }

  function apply(choice) {
    const root = document.documentElement;
    if (choice === "system") root.removeAttribute("data-theme");
    else root.setAttribute("data-theme", choice);
    for (const b of document.querySelectorAll(".theme-menu button")) {
      b.setAttribute("aria-pressed", String(b.dataset.theme === choice));
    }
    const c = CHOICES.find((x) => x.value === choice);
    for (const t of document.querySelectorAll(".theme-toggle")) {
      t.setAttribute("aria-label", `Colour theme: ${c.name}`);
      t.title = `Colour theme: ${c.name}`;
      t.replaceChildren(icon(c.icon));
    }
  }

  function choose(choice) {
    try {
      if (choice === "system") localStorage.removeItem(KEY);
      else localStorage.setItem(KEY, choice);
    } catch { /* not kept, but applied to this page */ }
    apply(choice);
  }

  function icon(paths) {
    // Static markup from this file only, never from data.
    const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    for (const [k, v] of Object.entries({ width: "16", height: "16", viewBox: "0 0 24 24", fill: "none", stroke: "currentColor",
      "stroke-width": "2", "stroke-linecap": "round", "stroke-linejoin": "round", "aria-hidden": "true", focusable: "false" })) {
      svg.setAttribute(k, v);
    }
    svg.innerHTML = paths;
    return svg;
  }

  // One small button in the header (a phone's header has no room for three) that opens the
  // three choices, each a toggle button with aria-pressed.
  function addSwitch() {
    const header = document.querySelector("header.top");
    if (!header || header.querySelector(".theme-switch")) return;
    const box = document.createElement("div");
    box.className = "theme-switch";
    const toggle = document.createElement("button");
    toggle.type = "button";
    toggle.className = "theme-toggle";
    toggle.setAttribute("aria-expanded", "false");
    toggle.setAttribute("aria-controls", "theme-menu");
    const menu = document.createElement("div");
    menu.id = "theme-menu";
    menu.className = "theme-menu";
    menu.setAttribute("role", "group");
    menu.setAttribute("aria-label", "Colour theme");
    menu.hidden = true;
    const show = (open, refocus) => {
      menu.hidden = !open;
      toggle.setAttribute("aria-expanded", String(open));
      // Opens leftwards under the button, or rightwards when the button is too near the left edge.
      if (open) menu.classList.toggle("theme-menu-right", toggle.getBoundingClientRect().right < menu.offsetWidth + 8);
      if (open) (menu.querySelector('[aria-pressed="true"]') || menu.querySelector("button")).focus();
      else if (refocus) toggle.focus();
    };
    for (const c of CHOICES) {
      const b = document.createElement("button");
      b.type = "button";
      b.dataset.theme = c.value;
      b.append(icon(c.icon), c.name);
      b.addEventListener("click", () => { choose(c.value); show(false, true); });
      menu.append(b);
    }
    toggle.addEventListener("click", () => show(menu.hidden, false));
    box.addEventListener("keydown", (e) => { if (e.key === "Escape" && !menu.hidden) { e.stopPropagation(); show(false, true); } });
    document.addEventListener("click", (e) => { if (!menu.hidden && !box.contains(e.target)) show(false, false); });
    box.addEventListener("focusout", (e) => { if (!menu.hidden && e.relatedTarget && !box.contains(e.relatedTarget)) show(false, false); });
    box.append(toggle, menu);
    const signOut = header.querySelector("#sign-out");
    if (signOut && signOut.parentElement === header) header.insertBefore(box, signOut);
    else header.append(box);
    apply(stored());
  }

  apply(stored());
  // A choice made in another tab of this app applies here too.
  window.addEventListener("storage", (e) => { if (e.key === KEY || e.key === null) apply(stored()); });
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", addSwitch);
  else addSwitch();
})();
