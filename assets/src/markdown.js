// NoteloomMarkdown: the page's Markdown renderer, the twin of src/noteloom/web/render.py.
//
// markdown-it with the server's options and plugins (CommonMark, GFM tables, strikethrough,
// task lists; math kept as source; [[Title]] wiki links; Joplin :/ID links marked for
// resolution), DOMPurify given the server sanitiser's (nh3) tags, attributes and URL schemes
// (and, apart, its SVG profile for diagrams drawn in the page: sanitizeSvg),
// and highlight.js with the common languages. The parity test
// (tests/browser/test_render_parity.py) holds render() equal to the server's output, so a
// change here needs its twin in render.py.
//
// Built by `bash scripts/build-assets.sh markdown` into static/vendor/markdown/markdown.js;
// static/render.js (NoteloomRender) is what pages call.
import MarkdownIt from "markdown-it";
import taskLists from "markdown-it-task-lists";
import DOMPurify from "dompurify";
import hljs from "highlight.js/lib/core";
import bash from "highlight.js/lib/languages/bash";
import c from "highlight.js/lib/languages/c";
import cpp from "highlight.js/lib/languages/cpp";
import css from "highlight.js/lib/languages/css";
import diff from "highlight.js/lib/languages/diff";
import go from "highlight.js/lib/languages/go";
import java from "highlight.js/lib/languages/java";
import javascript from "highlight.js/lib/languages/javascript";
import json from "highlight.js/lib/languages/json";
import markdown from "highlight.js/lib/languages/markdown";
import python from "highlight.js/lib/languages/python";
import rust from "highlight.js/lib/languages/rust";
import shell from "highlight.js/lib/languages/shell";
import sql from "highlight.js/lib/languages/sql";
import typescript from "highlight.js/lib/languages/typescript";
import xml from "highlight.js/lib/languages/xml";
import yaml from "highlight.js/lib/languages/yaml";

const LANGUAGES = { bash, c, cpp, css, diff, go, java, javascript, json, markdown, python, rust, shell, sql,
  typescript, xml, yaml };
for (const [name, lang] of Object.entries(LANGUAGES)) hljs.registerLanguage(name, lang);

// What nh3 keeps (render.py's _ALLOWED_TAGS and _ATTRIBUTES; test_render.py checks they agree).
const TAGS = ["a", "abbr", "acronym", "area", "article", "aside", "b", "bdi", "bdo", "blockquote", "br", "caption",
  "center", "cite", "code", "col", "colgroup", "data", "dd", "del", "details", "dfn", "div", "dl", "dt", "em",
  "figcaption", "figure", "footer", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hgroup", "hr", "i", "img",
  "input", "ins", "kbd", "li", "map", "mark", "nav", "ol", "p", "pre", "q", "rp", "rt", "rtc", "ruby", "s", "samp",
  "small", "span", "strike", "strong", "sub", "summary", "sup", "table", "tbody", "td", "th", "thead", "time", "tr",
  "tt", "u", "ul", "var", "wbr"];
const ATTRIBUTES = {
  "*": ["lang", "title"],
  a: ["class", "data-joplin-id", "data-wikilink", "href", "hreflang"], bdo: ["dir"], blockquote: ["cite"],
  code: ["class"], col: ["align", "char", "charoff", "span"], colgroup: ["align", "char", "charoff", "span"],
  del: ["cite", "datetime"], div: ["class"], hr: ["align", "size", "width"],
  img: ["align", "alt", "class", "data-joplin-id", "height", "src", "title", "width"],
  input: ["checked", "class", "disabled", "type"], ins: ["cite", "datetime"], li: ["class", "data-line"],
  ol: ["class", "start"], q: ["cite"], span: ["class"], table: ["align", "char", "charoff", "summary"],
  tbody: ["align", "char", "charoff"], td: ["align", "char", "charoff", "colspan", "headers", "rowspan"],
  tfoot: ["align", "char", "charoff"], th: ["align", "char", "charoff", "colspan", "headers", "rowspan", "scope"],
  thead: ["align", "char", "charoff"], tr: ["align", "char", "charoff"], ul: ["class"],
};
const URL_ATTRIBUTES = new Set(["href", "src", "cite"]);
const LINK_SCHEMES = new Set(["http:", "https:", "mailto:"]);
const LINK_REL = "noopener noreferrer nofollow";
const JOPLIN = /^:\/([0-9a-f]{32})$/;

const allowed = new Map(Object.entries(ATTRIBUTES).map(([tag, names]) => [tag, new Set(names)]));
const allAttributes = [...new Set(Object.values(ATTRIBUTES).flat())];

// nh3's rule: a URL with a scheme must be http, https or mailto; one without stays (a path).
function safeUrl(value) {
  const cleaned = value.replace(/[\t\n\r]/g, "").replace(/^[\x00-\x20]+|[\x00-\x20]+$/g, "");
  const m = /^([a-zA-Z][a-zA-Z0-9+.-]*):/.exec(cleaned);
  return !m || LINK_SCHEMES.has(m[1].toLowerCase() + ":");
}

DOMPurify.addHook("uponSanitizeAttribute", (node, data) => {
  const tag = node.nodeName.toLowerCase();
  const name = data.attrName;
  const ok = allowed.get("*").has(name) || (allowed.get(tag) || new Set()).has(name);
  if (!ok || (URL_ATTRIBUTES.has(name) && !safeUrl(data.attrValue))) data.keepAttr = false;
});
DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.nodeName === "A") node.setAttribute("rel", LINK_REL);
});

const PURIFY = { ALLOWED_TAGS: TAGS, ALLOWED_ATTR: allAttributes, ALLOW_DATA_ATTR: false, ALLOW_ARIA_ATTR: false,
  KEEP_CONTENT: true };

function sanitize(html) {
  return DOMPurify.sanitize(html, PURIFY);
}

// A diagram's SVG (mermaid's output) as a fragment to insert: DOMPurify's SVG profile, in an
// instance of its own so the hooks above (the note's HTML rules) do not strip SVG attributes.
// No script, no event handler, no foreignObject (HTML inside SVG), no javascript: link.
const svgPurify = DOMPurify(window);
const SVG_PURIFY = { USE_PROFILES: { svg: true, svgFilters: true }, RETURN_DOM_FRAGMENT: true,
  FORBID_TAGS: ["foreignObject", "script"] };
function sanitizeSvg(svg) {
  return svgPurify.sanitize(String(svg ?? ""), SVG_PURIFY);
}

// $x$: the opener not before a space, the closer not after a space nor before a digit.
function mathInline(state, silent) {
  const src = state.src;
  const start = state.pos;
  if (src[start] !== "$" || start + 1 >= state.posMax || " \t\n$".includes(src[start + 1])) return false;
  let end = start + 1;
  for (;;) {
    end = src.indexOf("$", end);
    if (end === -1 || end >= state.posMax) return false;
    if (src[end - 1] === "\\") { end += 1; continue; }
    if (" \t\n".includes(src[end - 1]) || (end + 1 < src.length && /[0-9]/.test(src[end + 1]))) return false;
    break;
  }
  if (!silent) {
    const token = state.push("math_inline", "span", 0);
    token.content = src.slice(start + 1, end);
    token.markup = "$";
  }
  state.pos = end + 1;
  return true;
}

function rstrip(s) { return s.replace(/\s+$/, ""); }

// $$ opening a line, up to the line ending in $$ (or the end of the container).
function mathBlock(state, startLine, endLine, silent) {
  let pos = state.bMarks[startLine] + state.tShift[startLine];
  let max = state.eMarks[startLine];
  if (state.sCount[startLine] - state.blkIndent >= 4 || state.src.slice(pos, pos + 2) !== "$$") return false;
  const first = state.src.slice(pos + 2, max);
  if (silent) return true;
  const lines = [];
  let line = startLine;
  if (rstrip(first).endsWith("$$") && first.trim() !== "") {
    lines.push(rstrip(first).slice(0, -2));
  } else {
    lines.push(first);
    for (;;) {
      line += 1;
      if (line >= endLine) break;
      pos = state.bMarks[line] + state.tShift[line];
      max = state.eMarks[line];
      if (pos < max && state.sCount[line] < state.blkIndent) break;
      const text = state.src.slice(pos, max);
      if (rstrip(text).endsWith("$$")) { lines.push(rstrip(text).slice(0, -2)); break; }
      lines.push(text);
    }
  }
  state.line = line + 1;
  const token = state.push("math_block", "div", 0);
  token.block = true;
  token.content = lines.join("\n").replace(/^\n+|\n+$/g, "");
  token.markup = "$$";
  token.map = [startLine, state.line];
  return true;
}

// [[Title]] or [[Title|label]] on one line, no brackets inside.
function wikilink(state, silent) {
  const src = state.src;
  const start = state.pos;
  if (!src.startsWith("[[", start)) return false;
  const end = src.indexOf("]]", start + 2);
  if (end === -1 || end > state.posMax) return false;
  const inner = src.slice(start + 2, end);
  if (!inner.trim() || /[[\]\n]/.test(inner)) return false;
  const bar = inner.indexOf("|");
  const title = (bar === -1 ? inner : inner.slice(0, bar)).trim();
  const label = (bar === -1 ? "" : inner.slice(bar + 1)).trim() || title;
  if (!title) return false;
  if (!silent) {
    const open = state.push("link_open", "a", 1);
    open.attrs = [["class", "wikilink"], ["data-wikilink", title]];
    open.markup = "wikilink";
    state.push("text", "", 0).content = label;
    state.push("link_close", "a", -1).markup = "wikilink";
  }
  state.pos = end + 2;
  return true;
}

const LANGUAGE = /^[A-Za-z0-9_+#.-]*$/;

// Task items carry their line; :/ID links and images carry the id, not the URL; a fence's
// language that is not a plain name is dropped (DOMPurify would drop such a class).
function markLinks(state) {
  for (const token of state.tokens) {
    if (token.type === "fence" && !LANGUAGE.test(token.info.trim().split(/\s+/)[0] || "")) token.info = "";
    if (token.type === "list_item_open" && String(token.attrGet("class") || "").includes("task-list-item")
        && token.map) {
      token.attrSet("data-line", String(token.map[0]));
    }
    for (const child of token.children || []) {
      if (child.type === "link_open") {
        const m = JOPLIN.exec(child.attrGet("href") || "");
        if (m) {
          child.attrs = child.attrs.filter(([name]) => name !== "href");
          child.attrSet("data-joplin-id", m[1]);
        }
      } else if (child.type === "image") {
        const m = JOPLIN.exec(child.attrGet("src") || "");
        if (m) {
          child.attrSet("src", `/attachments/${m[1]}`);
          child.attrSet("data-joplin-id", m[1]);
        }
      }
    }
  }
}

const md = new MarkdownIt("commonmark", { html: true, linkify: false, typographer: false });
md.enable(["table", "strikethrough"]);
md.use(taskLists);
md.block.ruler.before("fence", "math_block", mathBlock, { alt: ["paragraph", "reference", "blockquote", "list"] });
md.inline.ruler.before("escape", "math_inline", mathInline);
md.inline.ruler.before("link", "wikilink", wikilink);
md.core.ruler.push("noteloom_marks", markLinks);
md.renderer.rules.math_inline = (tokens, idx) =>
  `<span class="math-inline">${md.utils.escapeHtml(tokens[idx].content)}</span>`;
md.renderer.rules.math_block = (tokens, idx) =>
  `<div class="math-display">${md.utils.escapeHtml(tokens[idx].content)}</div>\n`;

// Sanitised HTML for `markdown`, links pending (as render_markdown without a resolver).
function render(markdownText) {
  return sanitize(md.render(String(markdownText ?? "")));
}

// Highlight each fenced block of `root` whose language is bundled (the others stay plain).
function highlight(root) {
  for (const code of root.querySelectorAll("pre > code[class*='language-']")) {
    if (code.dataset.highlighted) continue;
    const lang = /(?:^|\s)language-([\w+#-]+)/.exec(code.className);
    if (lang && hljs.getLanguage(lang[1])) hljs.highlightElement(code);
  }
}

window.NoteloomMarkdown = { md, render, sanitize, sanitizeSvg, highlight, hljs, languages: Object.keys(LANGUAGES) };
