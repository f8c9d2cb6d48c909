// A turn's tool calls, drawn the same way on the chat page (chat.js) and in the notes app's AI
// sidebar (sidebar.js): a folded list of calls, each with its result under it, drawn from the
// tool's render spec (noteloom.renderspec) when it has one, else as pretty-printed JSON in a
// folded box. Live events (tool_call, then tool_result) add a pending line and settle it.
// Loaded after session.js (it draws with NL.h); sets one global, NoteloomTools.
"use strict";

(() => {
  const h = (...a) => NL.h(...a);
  const callArgs = new WeakMap();  // a call's line → its arguments, kept when its result comes
  const UNTRUSTED_FENCE = /^<<UNTRUSTED_([0-9a-f]+)>>\n([\s\S]*)\n<<\/UNTRUSTED_\1>>$/;

  const countText = (n) => `${n} tool call${n > 1 ? "s" : ""}`;

  // The tool calls of a turn. Open, since a rendered result is part of the answer; each
  // call's raw result stays folded.
  function list(calls) {
    const ul = h("ul", { class: "tool-list" });
    for (const c of calls) ul.append(line(c));
    return h("details", { class: "tools", open: true }, h("summary", { text: countText(calls.length) }), ul);
  }

  function line(c) {
    const args = JSON.stringify(c.arguments || {});
    const mark = { done: "✓", error: "✗", pending: "…" }[c.status] || "…";
    const li = h("li", { class: `tool ${c.status}`, "data-call": c.id, "data-tool": c.name },
      h("div", { class: "tool-call", text: `${mark} ${c.name} ${args.length > 120 ? args.slice(0, 119) + "…" : args}` }));
    if (c.status === "done" && c.render) {
      const drawn = renderSpec(c.render);
      if (drawn) li.append(drawn);
    }
    if (typeof c.result === "string" && !li.querySelector(".tool-render")) {
      li.append(resultBox(c.result, c.status === "error", c.untrusted));
    }
    callArgs.set(li, c.arguments || {});
    return li;
  }

  // A result as the model read it: JSON pretty-printed when it parses, else the text.
  function resultBox(text, isError, untrusted) {
    let shown = text;
    try { shown = JSON.stringify(JSON.parse(text), null, 2); } catch { /* plain text (an error, a capped result) */ }
    const label = isError ? "Error" : untrusted ? "Result (text from outside your notes)" : "Result";
    return h("details", { class: "tool-result" }, h("summary", { text: label }), h("pre", { class: "tool-json", text: shown }));
  }

  // A live tool_call event: a pending line in `host`'s list of calls. Without a list yet, one
  // is made and handed to `place(details)` to be put where the caller wants it. Returns false
  // when the call is drawn already (from the message's view).
  function addCall(host, data, place) {
    if (host.querySelector(`.tool[data-call="${CSS.escape(data.call_id)}"]`)) return false;
    let ul = host.querySelector(".tools ul");
    if (!ul) {
      const d = list([]);
      place(d);
      ul = d.querySelector("ul");
    }
    ul.append(line({ id: data.call_id, name: data.name, arguments: data.arguments, status: "pending" }));
    ul.closest(".tools").querySelector("summary").textContent = countText(ul.children.length);
    return true;
  }

  // A live tool_result event: its pending line in `host` settled with the result. The live
  // event has the result as the model read it: its untrusted fence comes off here as the
  // API's view takes it off. A line the view drew settled (with its render) stays.
  function settleCall(host, data) {
    const old = host.querySelector(`.tool[data-call="${CSS.escape(data.call_id)}"]`);
    if (!old || !old.classList.contains("pending")) return;
    const fenced = UNTRUSTED_FENCE.exec(data.content || "");
    old.replaceWith(line({ id: data.call_id, name: data.name, arguments: callArgs.get(old) || {},
      status: data.is_error ? "error" : "done", result: fenced ? fenced[2] : data.content,
      untrusted: Boolean(fenced), render: data.render || null }));
  }

  // -- render specs (noteloom.renderspec) ---------------------------------------------------
  // Data, not code: every piece of text goes in with textContent, Markdown only as the server
  // sanitised it, and an image only from a plugin's static files or an attachment of the
  // workspace (fetched with the page's credential and shown as a blob: URL). Anything else
  // draws nothing, and the caller shows the JSON instead.
  const ASSET_SRC = /^\/plugins\/[A-Za-z0-9][A-Za-z0-9_-]{0,63}\/static\/(?:[A-Za-z0-9_-][A-Za-z0-9_.-]*\/)*[A-Za-z0-9_-][A-Za-z0-9_.-]*$/;
  const ATTACHMENT_SRC = /^\/attachments\/([0-9a-f]{32})$/;

  function renderSpec(spec) {
    const box = h("div", { class: `tool-render render-${spec.type}` });
    switch (spec.type) {
      case "markdown":
        if (typeof spec.html !== "string") return null;
        NL.setHtml(box, spec.html);  // sanitised by the server
        break;
      case "list": {
        const ul = h("ul", { class: "render-items" });
        for (const item of spec.items || []) {
          const li = h("li", { class: "render-item" });
          if (item.thumbnail) li.append(image(item.thumbnail, "render-thumb"));
          const words = h("div", { class: "render-words" }, h("div", { class: "render-title", text: String(item.title) }));
          if (item.subtitle != null) words.append(h("div", { class: "render-subtitle", text: String(item.subtitle) }));
          li.append(words);
          ul.append(li);
        }
        box.append(ul);
        break;
      }
      case "table": {
        const head = h("tr");
        for (const c of spec.columns || []) head.append(h("th", { scope: "col", text: String(c) }));
        const body = h("tbody");
        for (const row of spec.rows || []) {
          const tr = h("tr");
          for (const v of row) tr.append(cellOf("td", v));
          body.append(tr);
        }
        box.append(h("table", {}, h("thead", {}, head), body));
        break;
      }
      case "key_values": {
        const dl = h("dl");
        for (const [k, v] of spec.pairs || []) dl.append(h("dt", { text: String(k) }), cellOf("dd", v));
        box.append(dl);
        break;
      }
      case "gallery":
        for (const img of spec.images || []) box.append(image(img, "render-picture"));
        break;
      case "image":
        box.append(image(spec, "render-picture"));
        break;
      default:
        return null;
    }
    return box;
  }

  function cellOf(tag, v) {
    const node = h(tag);
    node.textContent = v === null || v === undefined ? "" : typeof v === "boolean" ? (v ? "yes" : "no") : String(v);
    return node;
  }

  function image(spec, cls) {
    const src = typeof spec.src === "string" ? spec.src : "";
    const img = h("img", { class: cls, alt: String(spec.alt || "") });
    const att = ATTACHMENT_SRC.exec(src);
    if (att) {
      img.dataset.attachment = att[1];
      NL.attachmentUrl(att[1]).then((url) => { img.src = url; }, () => { img.alt = `${img.alt || "image"} (unavailable)`; });
    } else if (ASSET_SRC.test(src)) {
      img.src = src;  // a plugin's static file: same origin, no credential, no user data
    } else {
      img.alt = `${img.alt || "image"} (not shown)`;
    }
    return img;
  }

  window.NoteloomTools = { list, line, resultBox, renderSpec, addCall, settleCall };
})();
