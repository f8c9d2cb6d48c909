// The note editor's core: CodeMirror 6 with Markdown (fenced code highlighted), line
// wrapping, history, the default and search keymaps, and proposed edits shown inline.
// Built by `bash scripts/build-assets.sh editor` into one IIFE that sets window.NoteloomEditor:
//
//   NoteloomEditor.create(parent, {doc, onChange(doc), onSelection({from, to, head, text}), onSave(),
//                                  onFiles(files, pos), label, readOnly})
//     -> {view, getDoc(), setDoc(text), focus(), proposeEdits(edits, {onDecision}), proposals(),
//         acceptEdit(id), rejectEdit(id), acceptAll(), rejectAll(), undo(), insertAtCursor(text),
//         setReadOnly(on), scrollToHeading(textOrSlug), toCodePoints(pos), fromCodePoints(n), destroy()}
//
// onFiles: files dropped or pasted into the editor (pos: where they were dropped), instead of
// CodeMirror's default of inserting a dropped file's text.
//
// Positions are CodeMirror's (UTF-16 code units); toCodePoints/fromCodePoints convert for
// APIs that count code points. A proposed edit {id, from, to, insert, label, original?} is
// drawn in place: the text it replaces struck through, the new text beside it, with Accept
// and Reject. Accepting applies it as one transaction isolated in the history, so one undo
// reverts exactly it. An edit whose text was changed after it was proposed (or whose
// `original` no longer matches) is refused: onDecision(id, false, reason).
import { EditorState, StateEffect, StateField, Transaction, Annotation, Compartment } from "@codemirror/state";
import { EditorView, Decoration, WidgetType, keymap, drawSelection, showPanel } from "@codemirror/view";
import { defaultKeymap, history, historyKeymap, undo as undoCommand, isolateHistory, indentWithTab } from "@codemirror/commands";
import { searchKeymap, highlightSelectionMatches } from "@codemirror/search";
import { markdown, markdownLanguage } from "@codemirror/lang-markdown";
import { HighlightStyle, LanguageDescription, StreamLanguage, syntaxHighlighting, indentOnInput } from "@codemirror/language";
import { tags as t } from "@lezer/highlight";
import { javascript } from "@codemirror/lang-javascript";
import { python } from "@codemirror/lang-python";
import { json } from "@codemirror/lang-json";
import { css } from "@codemirror/lang-css";
import { html } from "@codemirror/lang-html";
import { sql } from "@codemirror/lang-sql";
import { yaml } from "@codemirror/lang-yaml";
import { rust } from "@codemirror/lang-rust";
import { go } from "@codemirror/lang-go";
import { cpp } from "@codemirror/lang-cpp";
import { java } from "@codemirror/lang-java";
import { xml } from "@codemirror/lang-xml";
import { shell } from "@codemirror/legacy-modes/mode/shell";

// Statically imported: @codemirror/language-data loads each language with import(), which
// an IIFE bundle cannot split into files, so the few languages notes use most are listed here.
const lang = (name, alias, extensions, support) => LanguageDescription.of({ name, alias, extensions, support: support() });
const codeLanguages = [
  lang("JavaScript", ["js", "javascript", "node"], ["js", "mjs", "cjs"], () => javascript()),
  lang("TypeScript", ["ts", "typescript"], ["ts"], () => javascript({ typescript: true })),
  lang("JSX", ["jsx"], ["jsx"], () => javascript({ jsx: true })),
  lang("TSX", ["tsx"], ["tsx"], () => javascript({ jsx: true, typescript: true })),
  lang("Python", ["py", "python"], ["py"], () => python()),
  lang("JSON", ["json"], ["json"], () => json()),
  lang("CSS", ["css"], ["css"], () => css()),
  lang("HTML", ["html", "htm"], ["html"], () => html()),
  lang("SQL", ["sql"], ["sql"], () => sql()),
  lang("YAML", ["yaml", "yml"], ["yaml", "yml"], () => yaml()),
  lang("Rust", ["rust", "rs"], ["rs"], () => rust()),
  lang("Go", ["go", "golang"], ["go"], () => go()),
  lang("C++", ["cpp", "c++", "c", "h"], ["cpp", "c", "h"], () => cpp()),
  lang("Java", ["java"], ["java"], () => java()),
  lang("XML", ["xml", "svg"], ["xml", "svg"], () => xml()),
  lang("Shell", ["sh", "bash", "shell", "zsh", "console"], ["sh"], () => StreamLanguage.define(shell)),
];

const highlight = HighlightStyle.define([
  { tag: t.heading, fontWeight: "700", color: "var(--fg)" },
  { tag: t.heading1, fontSize: "1.25em" },
  { tag: t.heading2, fontSize: "1.12em" },
  { tag: t.strong, fontWeight: "700" },
  { tag: t.emphasis, fontStyle: "italic" },
  { tag: t.strikethrough, textDecoration: "line-through" },
  { tag: [t.link, t.url], color: "var(--accent)", textDecoration: "underline" },
  { tag: [t.processingInstruction, t.meta, t.monospace, t.contentSeparator], color: "var(--muted)" },
  { tag: t.quote, color: "var(--muted)", fontStyle: "italic" },
  { tag: [t.keyword, t.operatorKeyword, t.modifier, t.controlKeyword, t.definitionKeyword], color: "var(--accent)", fontWeight: "600" },
  { tag: [t.string, t.special(t.string), t.regexp], color: "var(--ok)" },
  { tag: [t.number, t.bool, t.null, t.atom], color: "var(--warn)" },
  { tag: [t.comment, t.lineComment, t.blockComment], color: "var(--muted)", fontStyle: "italic" },
  { tag: [t.function(t.variableName), t.function(t.propertyName), t.className, t.typeName], color: "var(--danger)" },
  { tag: [t.tagName, t.attributeName, t.propertyName], color: "var(--accent)" },
]);

const theme = EditorView.theme({
  "&": { color: "var(--fg)", backgroundColor: "var(--bg)", border: "1px solid var(--input-border)", borderRadius: "6px" },
  "&.cm-focused": { outline: "2px solid var(--focus)", outlineOffset: "1px" },
  ".cm-scroller": { fontFamily: "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace", lineHeight: "1.55" },
  ".cm-content": { caretColor: "var(--fg)", padding: "10px 4px" },
  ".cm-cursor, .cm-dropCursor": { borderLeftColor: "var(--fg)" },
  "&.cm-focused > .cm-scroller > .cm-selectionLayer .cm-selectionBackground, .cm-selectionBackground, .cm-content ::selection":
    { backgroundColor: "var(--selection)" },
  ".cm-activeLine": { backgroundColor: "transparent" },
  ".cm-panels": { backgroundColor: "var(--surface)", color: "var(--fg)" },
  ".cm-panels.cm-panels-top": { borderBottom: "1px solid var(--line)" },
  ".cm-panels.cm-panels-bottom": { borderTop: "1px solid var(--line)" },
  ".cm-searchMatch": { backgroundColor: "var(--surface-2)", outline: "1px solid var(--input-border)" },
  ".cm-searchMatch.cm-searchMatch-selected": { backgroundColor: "var(--selection)" },
  ".cm-selectionMatch": { backgroundColor: "var(--surface-2)" },
  ".cm-textfield, .cm-button": { color: "var(--fg)", backgroundColor: "var(--bg)", border: "1px solid var(--input-border)", backgroundImage: "none" },
  ".cm-nl-del": { backgroundColor: "var(--diff-del)", textDecoration: "line-through" },
  ".cm-nl-stale": { outline: "1px dashed var(--warn)" },
  ".cm-nl-proposal": { display: "inline", backgroundColor: "var(--diff-add)", borderRadius: "3px", padding: "0 2px", whiteSpace: "pre-wrap" },
  ".cm-nl-proposal-actions": { display: "inline-flex", gap: "4px", marginLeft: "4px", verticalAlign: "baseline", fontFamily: "system-ui, sans-serif" },
  ".cm-nl-proposal-actions button, .cm-nl-proposals-bar button": {
    font: "inherit", fontSize: "12px", padding: "0 6px", color: "var(--fg)", backgroundColor: "var(--bg)",
    border: "1px solid var(--input-border)", borderRadius: "4px", cursor: "pointer" },
  ".cm-nl-proposal-actions button:focus-visible, .cm-nl-proposals-bar button:focus-visible": { outline: "2px solid var(--focus)" },
  ".cm-nl-proposals-bar": { display: "flex", gap: "8px", alignItems: "center", padding: "4px 8px", fontFamily: "system-ui, sans-serif", fontSize: "13px" },
});

// -- proposed edits ---------------------------------------------------------------------

const addProposals = StateEffect.define();
const dropProposal = StateEffect.define();
const external = Annotation.define();

const proposalField = StateField.define({
  create: () => [],
  update(list, tr) {
    let out = list;
    if (tr.docChanged && out.length) {
      out = out.map((p) => {
        const touched = tr.changes.touchesRange(p.from, p.to);
        const from = tr.changes.mapPos(p.from, p.from === p.to ? -1 : 1);
        const to = Math.max(from, tr.changes.mapPos(p.to, -1));
        return { ...p, from, to, stale: p.stale || (touched ? "the text this edit changes was edited after it was proposed" : null) };
      });
    }
    for (const e of tr.effects) {
      if (e.is(addProposals)) {
        const ids = new Set(e.value.map((p) => p.id));
        out = out.filter((p) => !ids.has(p.id)).concat(e.value);
      } else if (e.is(dropProposal)) {
        out = out.filter((p) => p.id !== e.value);
      }
    }
    return out;
  },
  provide: (field) => [
    EditorView.decorations.from(field, (list) => {
      const ranges = [];
      for (const p of list) {
        if (p.to > p.from) ranges.push(Decoration.mark({ class: p.stale ? "cm-nl-del cm-nl-stale" : "cm-nl-del", attributes: { "data-proposal": p.id } }).range(p.from, p.to));
        ranges.push(Decoration.widget({ widget: new ProposalWidget(p), side: 1 }).range(p.to));
      }
      return Decoration.set(ranges, true);
    }),
    showPanel.from(field, (list) => (list.length ? proposalsPanel : null)),
  ],
});

class ProposalWidget extends WidgetType {
  constructor(p) { super(); this.p = p; }
  eq(other) { return other.p.id === this.p.id && other.p.insert === this.p.insert && other.p.stale === this.p.stale; }
  toDOM(view) {
    const wrap = document.createElement("span");
    wrap.className = "cm-nl-proposal-wrap";
    wrap.dataset.proposal = this.p.id;
    if (this.p.insert) {
      const ins = document.createElement("ins");
      ins.className = "cm-nl-proposal";
      ins.textContent = this.p.insert;
      wrap.append(ins);
    }
    const actions = document.createElement("span");
    actions.className = "cm-nl-proposal-actions";
    const what = this.p.label ? `: ${this.p.label}` : "";
    actions.append(
      button("Accept", `Accept edit${what}`, "accept", () => handleOf(view).acceptEdit(this.p.id)),
      button("Reject", `Reject edit${what}`, "reject", () => handleOf(view).rejectEdit(this.p.id)));
    wrap.append(actions);
    return wrap;
  }
  ignoreEvent() { return true; }
}

function button(text, label, action, onClick) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = text;
  b.setAttribute("aria-label", label);
  b.dataset.action = action;
  b.addEventListener("mousedown", (e) => e.preventDefault());
  b.addEventListener("click", (e) => { e.preventDefault(); onClick(); });
  return b;
}

function proposalsPanel(view) {
  const dom = document.createElement("div");
  dom.className = "cm-nl-proposals-bar";
  const count = document.createElement("span");
  const update = () => {
    const n = view.state.field(proposalField).length;
    count.textContent = `${n} proposed edit${n === 1 ? "" : "s"}`;
  };
  update();
  dom.append(count,
    button("Accept all", "Accept all proposed edits", "accept-all", () => handleOf(view).acceptAll()),
    button("Reject all", "Reject all proposed edits", "reject-all", () => handleOf(view).rejectAll()));
  return { dom, top: true, update };
}

const handles = new WeakMap();
const handleOf = (view) => handles.get(view);

// -- the editor -------------------------------------------------------------------------

function slug(text) {
  return String(text).toLowerCase().trim().replace(/[^\p{L}\p{N}\s-]/gu, "").replace(/\s+/g, "-");
}

function create(parent, opts = {}) {
  const onChange = opts.onChange || (() => {});
  const onSelection = opts.onSelection || (() => {});
  const onSave = opts.onSave || (() => {});
  const deciders = new Map();  // proposal id -> onDecision
  const editable = new Compartment();
  const editableExt = (on) => [EditorView.editable.of(on), EditorState.readOnly.of(!on)];
  const fileHandlers = EditorView.domEventHandlers({
    drop(e, view) {
      const files = e.dataTransfer ? Array.from(e.dataTransfer.files) : [];
      if (!files.length || !opts.onFiles) return false;
      e.preventDefault();
      const pos = view.posAtCoords({ x: e.clientX, y: e.clientY });
      opts.onFiles(files, pos === null ? view.state.selection.main.head : pos);
      return true;
    },
    paste(e, view) {
      const files = e.clipboardData ? Array.from(e.clipboardData.files) : [];
      if (!files.length || !opts.onFiles) return false;
      e.preventDefault();
      opts.onFiles(files, view.state.selection.main.head);
      return true;
    },
  });

  const state = EditorState.create({
    doc: opts.doc || "",
    extensions: [
      history(),
      drawSelection(),
      indentOnInput(),
      highlightSelectionMatches(),
      EditorView.lineWrapping,
      markdown({ base: markdownLanguage, codeLanguages }),
      syntaxHighlighting(highlight),
      theme,
      proposalField,
      fileHandlers,
      editable.of(editableExt(!opts.readOnly)),
      keymap.of([
        { key: "Mod-s", preventDefault: true, run: () => { onSave(); return true; } },
        ...defaultKeymap, ...historyKeymap, ...searchKeymap, indentWithTab,
      ]),
      EditorView.contentAttributes.of({ "aria-label": opts.label || "Note text", spellcheck: "true", autocapitalize: "sentences" }),
      EditorView.updateListener.of((u) => {
        if (u.docChanged && !u.transactions.some((tr) => tr.annotation(external))) onChange(u.state.doc.toString());
        if (u.selectionSet || u.docChanged) {
          const r = u.state.selection.main;
          onSelection({ from: r.from, to: r.to, head: r.head, text: u.state.sliceDoc(r.from, r.to) });
        }
      }),
    ],
  });
  const view = new EditorView({ state, parent });

  function decide(id, accepted, reason) {
    const cb = deciders.get(id);
    deciders.delete(id);
    if (cb) cb(id, accepted, reason);
  }

  function find(id) { return view.state.field(proposalField).find((p) => p.id === id); }

  const handle = {
    view,
    getDoc: () => view.state.doc.toString(),
    setDoc(text) {
      view.dispatch({
        changes: { from: 0, to: view.state.doc.length, insert: text },
        annotations: [Transaction.addToHistory.of(false), external.of(true)],
      });
    },
    focus: () => view.focus(),
    setReadOnly(on) { view.dispatch({ effects: editable.reconfigure(editableExt(!on)) }); },
    undo: () => undoCommand(view),
    insertAtCursor(text, at) {
      const r = at === undefined || at === null ? view.state.selection.main : { from: at, to: at };
      view.dispatch({ changes: { from: r.from, to: r.to, insert: text }, selection: { anchor: r.from + text.length },
        scrollIntoView: true, userEvent: "input" });
    },
    proposeEdits(edits, { onDecision } = {}) {
      const doc = view.state.doc;
      const list = [];
      for (const e of edits) {
        const from = Math.max(0, Math.min(e.from, doc.length));
        const to = Math.max(from, Math.min(e.to, doc.length));
        const original = doc.sliceString(from, to);
        const stale = (e.from !== from || e.to !== to) ? "the edit's place is outside the note"
          : (typeof e.original === "string" && e.original !== original) ? "the text at the edit's place is no longer what it was when the edit was proposed" : null;
        list.push({ id: String(e.id), from, to, insert: String(e.insert ?? ""), label: e.label || "", original, stale });
        if (onDecision) deciders.set(String(e.id), onDecision);
      }
      view.dispatch({ effects: addProposals.of(list) });
    },
    proposals: () => view.state.field(proposalField).map((p) => ({ ...p })),
    acceptEdit(id) {
      const p = find(id);
      if (!p) return false;
      const now = view.state.sliceDoc(p.from, p.to);
      const reason = p.stale || (now !== p.original ? "the text this edit changes was edited after it was proposed" : null);
      if (reason) {
        view.dispatch({ effects: dropProposal.of(id) });
        decide(id, false, reason);
        return false;
      }
      view.dispatch({
        changes: { from: p.from, to: p.to, insert: p.insert },
        effects: dropProposal.of(id),
        annotations: [isolateHistory.of("full"), Transaction.userEvent.of("input.proposal")],
        selection: { anchor: p.from + p.insert.length },
      });
      decide(id, true);
      return true;
    },
    rejectEdit(id) {
      if (!find(id)) return false;
      view.dispatch({ effects: dropProposal.of(id) });
      decide(id, false, "rejected");
      return true;
    },
    acceptAll() {
      // Last first: accepting one never moves the places of those before it.
      const ids = view.state.field(proposalField).slice().sort((a, b) => b.from - a.from).map((p) => p.id);
      return ids.map((id) => handle.acceptEdit(id));
    },
    rejectAll() {
      for (const p of view.state.field(proposalField).slice()) handle.rejectEdit(p.id);
    },
    scrollToHeading(target) {
      const want = slug(String(target).replace(/^#/, ""));
      const doc = view.state.doc;
      for (let i = 1; i <= doc.lines; i++) {
        const line = doc.line(i);
        const m = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line.text);
        if (m && (slug(m[1]) === want || m[1].trim().toLowerCase() === String(target).trim().toLowerCase())) {
          view.dispatch({ selection: { anchor: line.from }, effects: EditorView.scrollIntoView(line.from, { y: "start" }) });
          return true;
        }
      }
      return false;
    },
    toCodePoints(pos) {
      const s = view.state.sliceDoc(0, pos);
      let n = 0;
      for (let i = 0; i < s.length; i++) { const c = s.charCodeAt(i); if (c < 0xdc00 || c > 0xdfff || i === 0 || s.charCodeAt(i - 1) < 0xd800 || s.charCodeAt(i - 1) > 0xdbff) n++; }
      return n;
    },
    fromCodePoints(n) {
      const s = view.state.doc.toString();
      let pos = 0;
      for (let k = 0; k < n && pos < s.length; k++) { const c = s.codePointAt(pos); pos += c > 0xffff ? 2 : 1; }
      return pos;
    },
    destroy() { deciders.clear(); view.destroy(); },
  };
  handles.set(view, handle);
  return handle;
}

window.NoteloomEditor = { create, version: 1 };
