// The question page: ask once, see every chosen policy's context side by side over
// the document text. Hits and expansions are marked differently; SCAR's decisions
// (explain=true) are shown as a table. Everything shown comes from /v1/compare and
// /v1/documents; nothing is computed here except where the marks go.
"use strict";

const $ = (id) => document.getElementById(id);
const DEFAULT_POLICIES = ["topk", "window", "parent", "scar", "scar-sentences"];
const HIDDEN_POLICIES = ["rerank"]; // needs a model folder: /v1/retrieve only
const documents = new Map(); // doc_id -> Promise of the document's JSON
let traceHeaders = {};

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "class") node.className = value;
    else if (name.startsWith("data-")) node.setAttribute(name, value);
    else node[name] = value;
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function setStatus(text, isError = false) {
  $("status").textContent = text;
  $("status").classList.toggle("error", isError);
}

function fetchDocument(docId) {
  if (!documents.has(docId)) {
    documents.set(docId, apiJson("GET", "/v1/documents?id=" + encodeURIComponent(docId)));
  }
  return documents.get(docId);
}

// The ranges of `span` covered by first-stage hits, merged and sorted.
function hitRanges(context, span) {
  const hitIds = new Set(span.chunk_ids.filter((_, i) => span.reasons[i] === "hit"));
  const ranges = context.hits
    .filter((hit) => hit.doc_id === span.doc_id && hitIds.has(hit.chunk_id))
    .map((hit) => [Math.max(hit.start, span.start), Math.min(hit.end, span.end)])
    .filter(([start, end]) => start < end)
    .sort((a, b) => a[0] - b[0]);
  const merged = [];
  for (const range of ranges) {
    const last = merged[merged.length - 1];
    if (last && range[0] <= last[1]) last[1] = Math.max(last[1], range[1]);
    else merged.push([...range]);
  }
  return merged;
}

// The span cut into marked pieces: hits, and between them what the policy added
// (white space that only joins two pieces is marked as a join, not an expansion).
function pieces(context, span, text) {
  const out = [];
  const push = (kind, start, end) => {
    if (start >= end) return;
    const piece = text.slice(start, end);
    out.push({ kind: kind === "expansion" && !piece.trim() ? "join" : kind, start, end });
  };
  let at = span.start;
  for (const [start, end] of hitRanges(context, span)) {
    push("expansion", at, start);
    push("hit", start, end);
    at = end;
  }
  push("expansion", at, span.end);
  return out;
}

function renderSpan(context, span, doc, margin) {
  const text = doc.text;
  const before = Math.max(0, span.start - margin);
  const after = Math.min(text.length, span.end + margin);
  const reasons = [...new Set(span.reasons)].join(", ");
  const copies = (span.identical_in || []).length
    ? ` · identical in ${span.identical_in.join(", ")}` : "";
  const pre = el("pre", { class: "doc" });
  if (before > 0) pre.append(el("span", { class: "surrounding" }, "…"));
  pre.append(el("span", { class: "surrounding" }, text.slice(before, span.start)));
  for (const piece of pieces(context, span, text)) {
    pre.append(el("mark", {
      class: piece.kind, "data-kind": piece.kind, "data-doc": span.doc_id,
      "data-start": piece.start, "data-end": piece.end,
    }, text.slice(piece.start, piece.end)));
  }
  pre.append(el("span", { class: "surrounding" }, text.slice(span.end, after)));
  if (after < text.length) pre.append(el("span", { class: "surrounding" }, "…"));
  return el("div", {
    class: "span-block", "data-doc": span.doc_id, "data-start": span.start,
    "data-end": span.end,
  },
  el("div", { class: "where" },
    `${span.doc_id} [${span.start}:${span.end}] · score ${span.score.toFixed(3)} · ${reasons}${copies}`),
  pre);
}

// A question that names its document was also searched by its question part.
function renderFocus(contexts) {
  const focus = contexts.map((c) => c.focus).find((f) => f);
  $("focus").hidden = !focus;
  $("focus").textContent = focus
    ? `Focused on “${focus.question}”: “${focus.naming}” names ${focus.doc_id}.` : "";
}

function renderSummary(contexts) {
  const body = $("summary").querySelector("tbody");
  body.replaceChildren(...contexts.map((c) => el("tr", { "data-policy": c.policy },
    el("td", {}, c.policy), el("td", { class: "chunks" }, c.chunks),
    el("td", { class: "characters" }, c.characters), el("td", { class: "tokens" }, c.tokens),
    el("td", { class: "spans" }, c.spans.length), el("td", { class: "dropped" }, c.dropped))));
}

function formatCell(key, value) {
  if (value === null || value === undefined) return "—";
  if (typeof value === "number" && !Number.isInteger(value)) {
    return (value >= 0 ? "+" : "") + value.toFixed(3);
  }
  if (typeof value === "number" && key === "offset") return (value > 0 ? "+" : "") + value;
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

function renderDecisions(contexts) {
  const out = [];
  for (const context of contexts) {
    if (!context.trace.length) continue;
    // As `suture.explain.trace_columns`: SCAR's anchor only when it is not the seed.
    const columns = [...new Set(context.trace.flatMap((row) => Object.keys(row)))]
      .filter((c) => c !== "anchor" || context.trace.some((row) => row.anchor !== row.seed));
    const table = el("table", { class: "decision-table", "data-policy": context.policy },
      el("caption", {}, `${context.policy}: decisions`),
      el("thead", {}, el("tr", {}, ...columns.map((c) => el("th", {}, traceHeaders[c] || c)))),
      el("tbody", {}, ...context.trace.map((row) => el("tr", {
        class: row.decision ? "decision-" + String(row.decision).replace(/[^a-z]+/g, "-")
          .replace(/-$/, "") : "",
      }, ...columns.map((c) => el("td", {}, formatCell(c, row[c])))))));
    out.push(table);
    if (columns.includes("S")) {
      out.push(el("p", { class: "muted" },
        "b = 1 − cos(c,n); S = cos(q,n) − λ·b; added when S > τ·cos(q,c); " +
        "margin = S − τ·cos(q,c)"));
    }
  }
  $("decisions").replaceChildren(...out);
}

async function ask(event) {
  event.preventDefault();
  const policies = [...document.querySelectorAll("#policies input:checked")]
    .map((box) => box.value);
  if (!policies.length) { setStatus("Pick at least one policy.", true); return; }
  const budget = $("budget").value ? Number($("budget").value) : null;
  const body = {
    query: $("question").value, policies, k: $("k").value ? Number($("k").value) : null,
    budget, explain: true,
  };
  setStatus("Asking…");
  $("ask-button").disabled = true;
  try {
    const { contexts } = await apiJson("POST", "/v1/compare", body);
    const margin = Math.max(0, Number($("margin").value) || 0);
    const docIds = [...new Set(contexts.flatMap((c) => c.spans.map((s) => s.doc_id)))];
    const docs = new Map(await Promise.all(
      docIds.map(async (id) => [id, await fetchDocument(id)])));
    renderSummary(contexts);
    renderFocus(contexts);
    $("columns").replaceChildren(...contexts.map((context) => el("div", {
      class: "column", "data-policy": context.policy,
    },
    el("h2", {}, `${context.policy} · ${context.tokens} tokens · ${context.chunks} chunks`),
    ...context.spans.map((span) => renderSpan(context, span, docs.get(span.doc_id), margin)))));
    renderDecisions(contexts);
    $("results").hidden = false;
    setStatus(`${contexts.length} policies for “${body.query}”`);
    document.body.dataset.answered = body.query; // for tests: this question is shown
  } catch (error) {
    if (!askForKeyIfNeeded(error, $("key-label"), $("api-key"), $("status"))) {
      setStatus(error.message, true);
    }
  } finally {
    $("ask-button").disabled = false;
  }
}

async function start() {
  try {
    const info = await apiJson("GET", "/v1/info");
    traceHeaders = info.trace_headers;
    const index = info.index;
    $("index-info").textContent =
      `${index.documents} documents · ${index.chunks} chunks · ${index.embedder}`;
    const boxes = info.policies.filter((p) => !HIDDEN_POLICIES.includes(p)).map((policy) =>
      el("label", {}, el("input", {
        type: "checkbox", value: policy, checked: DEFAULT_POLICIES.includes(policy),
      }), " " + policy));
    $("policies").append(...boxes);
    $("question").maxLength = info.limits.max_query_chars;
    $("ask").addEventListener("submit", ask);
    document.body.dataset.ready = "true";
  } catch (error) {
    if (!askForKeyIfNeeded(error, $("key-label"), $("api-key"), $("status"))) {
      setStatus(error.message, true);
    }
  }
}

start();
