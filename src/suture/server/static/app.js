// The question page: ask once, see every chosen policy's context side by side over
// the document text. Hits and expansions are marked differently; each policy's decisions
// (explain=true) are shown as a table folded to those that changed the context. What is
// shown comes from /v1/info, /v1/compare and /v1/documents; nothing is computed here
// except where the marks go.
"use strict";

const $ = (id) => document.getElementById(id);
const documents = new Map(); // doc_id -> Promise of the document's JSON
let info = null; // /v1/info, once the server answered it

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "class") node.className = value;
    else if (name.startsWith("data-")) node.setAttribute(name, value);
    else node[name] = value;
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
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
    const answer = apiJson("GET", "/v1/documents?id=" + encodeURIComponent(docId));
    answer.catch(() => documents.delete(docId)); // asked again next time
    documents.set(docId, answer);
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

function budgetText(context) {
  const budget = context.budget;
  return budget ? `${budget.used} / ${budget.limit} ${budget.unit}` : "—";
}

function renderSummary(contexts) {
  const body = $("summary").querySelector("tbody");
  body.replaceChildren(...contexts.map((c) => el("tr", { "data-policy": c.policy },
    el("td", {}, c.policy), el("td", { class: "chunks" }, c.chunks),
    el("td", { class: "characters" }, c.characters), el("td", { class: "tokens" }, c.tokens),
    el("td", { class: "spans" }, c.spans.length), el("td", { class: "dropped" }, c.dropped),
    el("td", { class: "budget", title: c.budget ? c.budget.stopped : "no budget" },
      budgetText(c)))));
}

function renderColumn(context, docs, margin) {
  const isDefault = context.policy === info.default_policy;
  const budget = context.budget;
  return el("div", {
    class: "column" + (isDefault ? " default" : ""), "data-policy": context.policy,
  },
  el("h2", {}, context.policy, isDefault && el("span", { class: "badge" }, "default")),
  el("p", { class: "stats" }, `${context.tokens} tokens · ${context.chunks} chunks`),
  budget && el("p", {
    class: "budget", "data-used": budget.used, "data-limit": budget.limit,
  }, `budget ${budgetText(context)} · ${budget.stopped}`),
  ...context.spans.map((span) => renderSpan(context, span, docs.get(span.doc_id), margin)));
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

// Folded: only the rows that changed the context or ended a walk (the server names the
// others: `trace_quiet_decisions`); the button unfolds the whole trace.
function setFolded(block, folded) {
  const table = block.querySelector("table");
  const total = table.tBodies[0].rows.length;
  const quiet = table.querySelectorAll("tr.quiet").length;
  table.classList.toggle("folded", folded);
  block.dataset.folded = String(folded);
  const button = block.querySelector("button.unfold");
  if (button) {
    button.textContent = folded
      ? `show all ${total} rows (${quiet} not reached or duplicate)`
      : `show only the ${total - quiet} decisions that changed the context`;
  }
}

function renderDecisions(contexts) {
  const quietDecisions = new Set(info.trace_quiet_decisions);
  const out = [];
  for (const context of contexts) {
    if (!context.trace.length) continue;
    // As `suture.explain.trace_columns`: SCAR's anchor only when it is not the seed.
    const columns = [...new Set(context.trace.flatMap((row) => Object.keys(row)))]
      .filter((c) => c !== "anchor" || context.trace.some((row) => row.anchor !== row.seed));
    const rows = context.trace.map((row) => {
      const classes = [];
      if (row.decision) {
        classes.push("decision-" + String(row.decision).replace(/[^a-z]+/g, "-")
          .replace(/-$/, ""));
      }
      if (quietDecisions.has(row.decision)) classes.push("quiet");
      return el("tr", { class: classes.join(" ") },
        ...columns.map((c) => el("td", {}, formatCell(c, row[c]))));
    });
    const quiet = rows.filter((row) => row.classList.contains("quiet")).length;
    const table = el("table", { class: "decision-table", "data-policy": context.policy },
      el("caption", {}, `${context.policy}: decisions`),
      el("thead", {}, el("tr", {},
        ...columns.map((c) => el("th", {}, info.trace_headers[c] || c)))),
      el("tbody", {}, ...rows));
    const block = el("div", { class: "decision-block", "data-policy": context.policy },
      table,
      quiet > 0 && el("button", { type: "button", class: "unfold link" }));
    const button = block.querySelector("button.unfold");
    if (button) button.onclick = () => setFolded(block, block.dataset.folded !== "true");
    setFolded(block, true);
    if (columns.includes("S")) {
      block.append(el("p", { class: "muted" },
        "b = 1 − cos(c,n); S = cos(q,n) − λ·b; added when S > τ·cos(q,c); " +
        "margin = S − τ·cos(q,c)"));
    }
    out.push(block);
  }
  $("decisions").replaceChildren(...out);
}

function clearResults() {
  $("results").hidden = true;
  $("summary").querySelector("tbody").replaceChildren();
  $("columns").replaceChildren();
  $("decisions").replaceChildren();
  $("focus").hidden = true;
  delete document.body.dataset.answered;
}

function showError(error) {
  if (!askForKeyIfNeeded(error, $("key-form"), $("api-key"), $("status"))) {
    setStatus(error.message, true);
  }
}

async function ask(event) {
  event.preventDefault();
  if (!info) return;
  const policies = [...document.querySelectorAll("#policies input:checked")]
    .map((box) => box.value);
  if (!policies.length) { setStatus("Pick at least one policy.", true); return; }
  const body = {
    query: $("question").value, policies, k: $("k").value ? Number($("k").value) : null,
    explain: true,
  };
  // an empty budget field sends none: the server's default budget applies
  if ($("budget").value) body.budget = Number($("budget").value);
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
    $("columns").replaceChildren(...contexts.map((c) => renderColumn(c, docs, margin)));
    renderDecisions(contexts);
    $("results").hidden = false;
    setStatus(`${contexts.length} policies for “${body.query}”`);
    document.body.dataset.answered = body.query; // for tests: this question is shown
  } catch (error) {
    clearResults(); // never an old answer under a new error
    showError(error);
  } finally {
    $("ask-button").disabled = false;
  }
}

// The policies /v1/compare runs, the default first and ticked with the others compare
// shows by default; one that cannot run on this index is disabled, with the reason.
function renderPolicies() {
  const status = info.policy_status;
  const names = [info.default_policy,
    ...info.policies.filter((p) => p !== info.default_policy)]
    .filter((p) => status[p] && status[p].compare);
  const boxes = names.map((policy) => {
    const { available, reason } = status[policy];
    return el("label", {
      class: available ? "" : "unavailable", "data-policy": policy,
      title: available ? "" : reason,
    }, el("input", {
      type: "checkbox", value: policy, disabled: !available,
      checked: available && info.compared_policies.includes(policy),
    }), " " + policy, policy === info.default_policy && el("span", { class: "badge" }, "default"));
  });
  $("policies").replaceChildren(el("legend", {}, "policies"), ...boxes);
  const missing = names.filter((p) => !status[p].available);
  $("unavailable").hidden = !missing.length;
  $("unavailable").replaceChildren(...missing.map((p) => el("span", {
    class: "reason", "data-policy": p,
  }, `${p} cannot run on this index: ${status[p].reason}`)));
}

async function start() {
  setStatus("Loading the index…");
  try {
    info = await apiJson("GET", "/v1/info");
  } catch (error) {
    showError(error);
    $("key-button").disabled = false;
    return;
  }
  $("key-form").hidden = true;
  $("forget-key").hidden = !(info.auth && apiKey());
  if (info.default_budget) $("budget").placeholder = `${info.default_budget} (default)`;
  const index = info.index;
  $("index-info").textContent =
    `${index.documents} documents · ${index.chunks} chunks · ${index.embedder}`;
  renderPolicies();
  $("question").maxLength = info.limits.max_query_chars;
  $("question").disabled = false;
  $("ask-button").disabled = false;
  setStatus("");
  $("question").focus();
  document.body.dataset.ready = "true";
}

$("ask").addEventListener("submit", ask);
$("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  setApiKey($("api-key").value.trim());
  $("key-button").disabled = true;
  start();
});
$("forget-key").addEventListener("click", () => { setApiKey(""); location.reload(); });
start();
