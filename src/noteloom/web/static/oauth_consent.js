// The OAuth consent page: what a remote MCP client asks for, and the person's answer. Every
// request goes through session.js (the session header; the sign-in form after a 401); every
// text from the client goes in as textContent. The decision answers with the client's
// redirect URI, where the browser goes next.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const h = NL.h;
  const secret = new URLSearchParams(location.search).get("request") || "";
  const base = `/api/v1/oauth/requests/${encodeURIComponent(secret)}`;

  function showError(err) {
    if (err && err.status === 401) return;  // the sign-in form is showing
    $("consent-error").textContent = err ? err.message : "";
    $("consent-error").hidden = !err;
  }

  async function decide(approve) {
    showError(null);
    const write = approve && document.querySelector("input[name=access]:checked").value === "write";
    const notebooks = [...document.querySelectorAll("#consent-notebooks input:checked")].map((i) => i.value);
    // Every tool it may use left ticked: no tool limit (tools turned on later come too).
    const offered = [...document.querySelectorAll("#consent-tools label:not([hidden]) input")];
    const ticked = offered.filter((i) => i.checked).map((i) => i.value);
    const tools = ticked.length === offered.length ? null : ticked;
    for (const b of [$("consent-allow"), $("consent-deny")]) b.disabled = true;
    try {
      const answer = await NL.api("POST", `${base}/decision`, { approve, write, notebooks, tools });
      location.assign(answer.redirect);
    } catch (err) {
      for (const b of [$("consent-allow"), $("consent-deny")]) b.disabled = false;
      showError(err);
    }
  }

  NL.start(async () => {
    try {
      const ask = await NL.api("GET", base);
      $("consent-client").textContent = ask.client_name;
      $("consent-client-id").textContent = ask.client_name === ask.client_id ? "" : `(${ask.client_id})`;
      $("consent-redirect").textContent = ask.redirect_host;
      $("consent-unverified").hidden = ask.verified_by_document;
      if (!ask.write_requested) $("consent-write-label").hidden = true;
      const list = $("consent-notebooks");
      ask.notebooks.forEach((path, i) => {
        list.append(h("label", {}, h("input", { type: "checkbox", value: path, id: `consent-nb-${i}` }), ` ${path}`));
      });
      const tools = $("consent-tools");
      ask.tools.forEach((t, i) => {
        tools.append(h("label", { "data-writes": t.writes ? "1" : null, hidden: t.writes },
          h("input", { type: "checkbox", value: t.name, id: `consent-tool-${i}`, checked: true }), ` ${t.title}`));
      });
      const showWrites = () => {
        const write = document.querySelector("input[name=access]:checked").value === "write";
        for (const label of tools.querySelectorAll("label[data-writes]")) label.hidden = !write;
      };
      for (const radio of document.querySelectorAll("input[name=access]")) radio.addEventListener("change", showWrites);
      $("consent-form").hidden = false;
      $("consent-form").addEventListener("submit", (e) => { e.preventDefault(); decide(true); });
      $("consent-deny").addEventListener("click", () => decide(false));
    } catch (err) {
      showError(err);
    }
    document.body.setAttribute("data-ready", "1");
  });
})();
