// The colour theme: the person's choice (light or dark) or, by default, the system's.
//
// Loaded in every page's <head> without `defer`, so html[data-theme] is set before the first
// paint and a page chosen dark never flashes light. noteloom.css holds the two palettes; with
// no data-theme it follows prefers-color-scheme. Once the document is parsed, a switch
// (System / Light / Dark, buttons with aria-pressed) goes into the page's header.top.
"use strict";

(() => {
  const KEY = "noteloom.theme";
  const CHOICES = [
    { value: "system", name: "Theme: follow the system",
      icon: '<circle cx="12" cy="12" r="8"/><path d="M12 4a8 8 0 0 1 0 16z" fill="currentColor"/>' },
    { value: "light", name: "Theme: light",
      icon: '<circle cx="12" cy="12" r="4"/><path d="M12 2v2M12 20v2M2 12h2M20 12h2M4.9 4.9l1.4 1.4M17.7 17.7l1.4 1.4M4.9 19.1l1.4-1.4M17.7 6.3l1.4-1.4"/>' },
    { value: "dark", name: "Theme: dark",
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
    for (const b of document.querySelectorAll(".theme-switch button")) {
      b.setAttribute("aria-pressed", String(b.dataset.theme === choice));
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

  function addSwitch() {
    const header = document.querySelector("header.top");
    if (!header || header.querySelector(".theme-switch")) return;
    const group = document.createElement("div");
    group.className = "theme-switch";
    group.setAttribute("role", "group");
    group.setAttribute("aria-label", "Colour theme");
    for (const c of CHOICES) {
      const b = document.createElement("button");
      b.type = "button";
      b.dataset.theme = c.value;
      b.setAttribute("aria-label", c.name);
      b.title = c.name;
      b.append(icon(c.icon));
      b.addEventListener("click", () => choose(c.value));
      group.append(b);
    }
    const signOut = header.querySelector("#sign-out");
    if (signOut && signOut.parentElement === header) header.insertBefore(group, signOut);
    else header.append(group);
    apply(stored());
  }

  apply(stored());
  // A choice made in another tab of this app applies here too.
  window.addEventListener("storage", (e) => { if (e.key === KEY || e.key === null) apply(stored()); });
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", addSwitch);
  else addSwitch();
})();
