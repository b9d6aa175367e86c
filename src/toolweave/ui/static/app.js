// toolweave web: a chat on the AI SDK UI message stream (/api/chat) and a tools panel
// (/api/tools). Plain JS, no build step. Everything a model or a tool wrote is shown with
// textContent, never parsed as HTML.
"use strict";

const state = { messages: [], busy: false, always: new Set() };
// the conversation's id: the "Always allow" answers the server signs are bound to it
const chatId = `web-${crypto.randomUUID ? crypto.randomUUID() : Date.now() + "-" + Math.random()}`;
const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const child of children) if (child != null) node.append(child);
  return node;
}

const pretty = (value) => (typeof value === "string" ? value : JSON.stringify(value, null, 2));
const newId = (prefix) => `${prefix}_${Math.random().toString(36).slice(2)}${Date.now().toString(36)}`;

function showError(text) {
  const box = $("error");
  box.hidden = !text;
  box.textContent = text || "";
}

// --- the stream -------------------------------------------------------------------------

function applyChunk(message, chunk) {
  const parts = message.parts;
  const tool = (id) => parts.find((p) => p.toolCallId === id && p.type.startsWith("tool-"));
  const byId = (type, id) => parts.findLast((p) => p.type === type && p.id === id);
  switch (chunk.type) {
    case "start": if (chunk.messageId) message.id = chunk.messageId; break;
    case "start-step": parts.push({ type: "step-start" }); break;
    case "text-start": parts.push({ type: "text", id: chunk.id, text: "" }); break;
    case "text-delta": byId("text", chunk.id).text += chunk.delta; break;
    case "reasoning-start": parts.push({ type: "reasoning", id: chunk.id, text: "" }); break;
    case "reasoning-delta": byId("reasoning", chunk.id).text += chunk.delta; break;
    case "tool-input-start":
      parts.push({ type: `tool-${chunk.toolName}`, toolCallId: chunk.toolCallId, state: "input-streaming", rawInput: "" });
      break;
    case "tool-input-delta": tool(chunk.toolCallId).rawInput += chunk.inputTextDelta; break;
    case "tool-input-available": {
      let part = tool(chunk.toolCallId);
      if (!part) { part = { type: `tool-${chunk.toolName}`, toolCallId: chunk.toolCallId }; parts.push(part); }
      Object.assign(part, { state: "input-available", input: chunk.input });
      break;
    }
    case "tool-approval-request":
      Object.assign(tool(chunk.toolCallId), { state: "approval-requested", approval: { id: chunk.approvalId } });
      break;
    case "tool-output-available": Object.assign(tool(chunk.toolCallId), { state: "output-available", output: chunk.output }); break;
    case "tool-output-error": Object.assign(tool(chunk.toolCallId), { state: "output-error", errorText: chunk.errorText }); break;
    case "tool-output-denied": tool(chunk.toolCallId).state = "output-denied"; break;
    case "error": showError(chunk.errorText); break;
    case "finish": if (chunk.messageMetadata) message.metadata = chunk.messageMetadata; break;
    default:
      if (chunk.type.startsWith("data-")) {
        const existing = chunk.id != null ? byId(chunk.type, chunk.id) : null;
        if (existing) existing.data = chunk.data;
        else parts.push({ type: chunk.type, id: chunk.id, data: chunk.data });
      }
  }
}

async function stream(message) {
  state.busy = true;
  render();
  showError("");
  try {
    const response = await fetch("/api/chat", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ id: chatId, messages: state.messages.filter((m) => m !== message || m.parts.length), trigger: "submit-message" }),
    });
    if (!response.ok) throw new Error(`${response.status}: ${await response.text()}`);
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        for (const line of event.split("\n")) {
          if (!line.startsWith("data: ")) continue;
          const data = line.slice(6);
          if (data === "[DONE]") continue;
          applyChunk(message, JSON.parse(data));
        }
      }
      render();
    }
  } catch (e) {
    showError(String(e));
  } finally {
    state.busy = false;
    render();
  }
  autoApprove(message);
}

async function send(text) {
  state.messages.push({ id: newId("user"), role: "user", parts: [{ type: "text", text }] });
  const reply = { id: newId("msg"), role: "assistant", parts: [] };
  state.messages.push(reply);
  await stream(reply);
}

function waiting(message) {
  return message.parts.filter((p) => p.state === "approval-requested");
}

async function answer(message, part, approved, extra = {}) {
  part.state = "approval-responded";
  part.approval = { ...part.approval, approved, ...extra.reason ? { reason: extra.reason } : {}, ...extra.always ? { always: true } : {} };
  if (extra.input !== undefined) part.input = extra.input;
  render();
  if (waiting(message).length === 0) await stream(message);
}

function autoApprove(message) {
  for (const part of waiting(message)) {
    if (state.always.has(part.type.slice(5))) { answer(message, part, true); return; }
  }
}

// --- rendering ----------------------------------------------------------------------------

function progressOf(message, callId) {
  return message.parts.find((p) => p.type === "data-toolweave-progress" && p.data && p.data.toolCallId === callId);
}

function outputNode(output) {
  if (output && typeof output === "object" && Array.isArray(output.media)) {
    const box = el("div", {}, el("pre", { class: "output", text: output.text || "" }));
    for (const item of output.media) {
      if (item.type === "image") box.append(el("img", { src: item.url, alt: "tool image" }));
      else box.append(el("a", { href: item.url, download: item.filename || "file", text: item.filename || item.mediaType }));
    }
    return box;
  }
  return el("pre", { class: "output", "data-testid": "tool-output", text: pretty(output) });
}

function toolCard(message, part) {
  const name = part.type.slice(5);
  const card = el("div", { class: "tool-card", "data-testid": "tool-card", "data-tool": name, "data-state": part.state },
    el("span", { class: "state", text: part.state }),
    el("div", { class: "title", text: `${name}` }),
    el("pre", { class: "args", "data-testid": "tool-args", text: part.input !== undefined ? pretty(part.input) : part.rawInput || "" }));
  const progress = progressOf(message, part.toolCallId);
  if (progress && part.state !== "output-available") {
    const { progress: done, total, message: note } = progress.data;
    card.append(el("div", { class: "progress", text: `progress ${done}${total ? ` / ${total}` : ""}${note ? ` · ${note}` : ""}` }));
  }
  if (part.state === "output-available") card.append(outputNode(part.output));
  if (part.state === "output-error") card.append(el("pre", { class: "error", text: part.errorText }));
  if (part.state === "output-denied") card.append(el("div", { class: "error", text: "denied" }));
  if (part.state === "approval-requested") {
    const editor = el("textarea", { rows: "3", hidden: "", "data-testid": "edit-args" });
    editor.value = pretty(part.input ?? {});
    const reason = el("input", { type: "text", placeholder: "reason (optional, for the model)", "data-testid": "deny-reason" });
    card.append(el("div", { class: "approval" },
      el("button", { class: "primary", "data-testid": "approve", text: "Approve", onclick: () => {
        if (!editor.hidden) {
          try { answer(message, part, true, { input: JSON.parse(editor.value) }); } catch (e) { showError(`invalid JSON: ${e}`); }
        } else answer(message, part, true);
      } }),
      el("button", { "data-testid": "edit", text: "Edit", onclick: () => { editor.hidden = !editor.hidden; } }),
      el("button", { class: "danger", "data-testid": "deny", text: "Deny", onclick: () => answer(message, part, false, { reason: reason.value }) }),
      el("button", { "data-testid": "always", text: `Always allow ${name}`, onclick: () => { state.always.add(name); answer(message, part, true, { always: true }); } })),
    editor, reason);
  }
  return card;
}

function render() {
  const box = $("messages");
  box.replaceChildren();
  for (const message of state.messages) {
    if (message.role === "user") {
      box.append(el("div", { class: "message user", "data-testid": "user-message", text: message.parts.map((p) => p.text || "").join("") }));
      continue;
    }
    const node = el("div", { class: "message assistant", "data-testid": "assistant-message" });
    for (const part of message.parts) {
      if (part.type === "text") node.append(el("div", { class: "text", "data-testid": "assistant-text", text: part.text }));
      else if (part.type === "reasoning") node.append(el("details", { class: "reasoning" }, el("summary", { text: "reasoning" }), el("div", { text: part.text })));
      else if (part.type.startsWith("tool-")) node.append(toolCard(message, part));
      else if (part.type === "data-toolweave-output") node.append(el("pre", { text: pretty(part.data) }));
    }
    box.append(node);
  }
  $("send").disabled = state.busy;
  box.scrollTop = box.scrollHeight;
}

// --- the tools panel -----------------------------------------------------------------------

function field(name, schema, required) {
  const label = el("label", { text: `${name}${required ? " *" : ""}${schema.description ? ` — ${schema.description}` : ""}` });
  let input;
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== "null") : schema.type;
  if (Array.isArray(schema.enum)) {
    input = el("select", {}, ...schema.enum.map((v) => el("option", { value: JSON.stringify(v), text: String(v) })));
    input.dataset.kind = "enum";
  } else if (type === "boolean") {
    input = el("input", { type: "checkbox" });
    input.dataset.kind = "boolean";
  } else if (type === "integer" || type === "number") {
    input = el("input", { type: "number", step: type === "integer" ? "1" : "any" });
    input.dataset.kind = type;
  } else if (type === "string") {
    input = el("input", { type: "text" });
    input.dataset.kind = "string";
  } else {
    input = el("textarea", { rows: "2", placeholder: "JSON" });
    input.dataset.kind = "json";
  }
  if (schema.default !== undefined) {
    if (input.dataset.kind === "boolean") input.checked = Boolean(schema.default);
    else if (input.dataset.kind === "json") input.value = JSON.stringify(schema.default);
    else if (input.dataset.kind === "enum") input.value = JSON.stringify(schema.default);
    else input.value = String(schema.default);
  }
  input.name = name;
  input.dataset.testid = `arg-${name}`;
  input.setAttribute("data-testid", `arg-${name}`);
  return [label, input];
}

function readForm(form) {
  const args = {};
  for (const input of form.querySelectorAll("[data-kind]")) {
    const kind = input.dataset.kind;
    if (kind === "boolean") { args[input.name] = input.checked; continue; }
    if (input.value === "") continue;
    if (kind === "integer" || kind === "number") args[input.name] = Number(input.value);
    else if (kind === "json" || kind === "enum") args[input.name] = JSON.parse(input.value);
    else args[input.name] = input.value;
  }
  return args;
}

async function loadTools() {
  const [info, tools] = await Promise.all([fetch("/api/info").then((r) => r.json()), fetch("/api/tools").then((r) => r.json())]);
  $("model").textContent = info.model;
  if (info.durable) {
    loadDurable().catch((e) => showError(String(e)));
    setInterval(() => loadDurable().catch(() => {}), 5000);
  }
  const list = $("tool-list");
  list.replaceChildren();
  for (const tool of tools) {
    const schema = tool.parameters || {};
    const required = new Set(schema.required || []);
    const result = el("div", { class: "result", "data-testid": "tool-result", hidden: "" });
    const form = el("form", { "data-testid": `tool-form-${tool.name}` });
    for (const [name, prop] of Object.entries(schema.properties || {})) form.append(...field(name, prop, required.has(name)));
    form.append(el("button", { type: "submit", class: "primary", "data-testid": "call", text: "Call" }));
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      result.hidden = false;
      try {
        const response = await fetch(`/api/tools/${encodeURIComponent(tool.name)}`, {
          method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(readForm(form)),
        });
        const body = await response.json();
        result.textContent = response.ok ? `${body.isError ? "error: " : ""}${body.text}` : `error: ${body.error}`;
      } catch (e) {
        result.textContent = `error: ${e}`;
      }
    });
    const summary = el("summary", { text: tool.name }, tool.approval !== "never" ? el("span", { class: "badge", text: `approval: ${tool.approval}` }) : null);
    list.append(el("details", { class: "tool", "data-testid": "tool", "data-tool": tool.name }, summary,
      el("div", { class: "hint", text: tool.description }), form, result));
  }
}

// --- durable conversations: the calls waiting for a decision -------------------------------
let durableShown = "";

async function loadDurable() {
  const response = await fetch("/api/durable/pending");
  const body = await response.json();
  const status = $("durable-list");
  if (!response.ok) { status.replaceChildren(el("div", { class: "error", text: `error: ${body.error}` })); durableShown = ""; return; }
  $("durable").hidden = !body.enabled;
  const key = JSON.stringify(body.calls);
  if (key === durableShown) return; // unchanged: keep the cards (and what is typed in them)
  durableShown = key;
  status.replaceChildren();
  if (!body.calls.length) status.append(el("div", { class: "hint", "data-testid": "durable-empty", text: "Nothing is waiting." }));
  for (const call of body.calls) status.append(pendingCard(call));
}

function pendingCard(call) {
  const card = el("div", { class: "tool-card pending", "data-testid": "pending-call", "data-conversation": call.conversation_id, "data-call": call.id, "data-tool": call.tool_name },
    el("div", { class: "title", text: call.tool_name }),
    el("div", { class: "hint", text: `conversation ${call.conversation_id} · call ${call.id}` }),
    el("pre", { class: "args", "data-testid": "pending-args", text: pretty(call.arguments) }),
    call.message ? el("div", { class: "hint", text: call.message }) : null);
  const outcome = el("div", { class: "hint", "data-testid": "pending-outcome" });
  if (call.reason !== "approval") {
    card.append(el("div", { class: "hint", text: "waiting for a deferred result: its caller answers it" }));
    return card;
  }
  const reason = el("input", { type: "text", placeholder: "reason (optional, for the model)", "data-testid": "pending-deny-reason" });
  const decide = async (decision) => {
    for (const button of card.querySelectorAll("button")) button.disabled = true;
    try {
      const response = await fetch("/api/durable/decide", {
        method: "POST", headers: { "content-type": "application/json" },
        body: JSON.stringify({ conversation_id: call.conversation_id, call_id: call.id, decision, reason: reason.value || undefined }),
      });
      const body = await response.json();
      outcome.textContent = response.ok ? (decision === "approve" ? "approved: the conversation goes on" : "denied: the conversation goes on") : `error: ${body.error}`;
      card.dataset.decided = response.ok ? decision : "error";
    } catch (e) {
      outcome.textContent = `error: ${e}`;
      card.dataset.decided = "error";
    }
  };
  card.append(el("div", { class: "approval" },
    el("button", { class: "primary", "data-testid": "pending-approve", text: "Approve", onclick: () => decide("approve") }),
    el("button", { class: "danger", "data-testid": "pending-deny", text: "Deny", onclick: () => decide("deny") }), reason), outcome);
  return card;
}

$("durable-refresh").addEventListener("click", () => loadDurable().catch((e) => showError(String(e))));

$("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  const text = $("input").value.trim();
  if (!text || state.busy) return;
  $("input").value = "";
  send(text);
});
$("input").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); $("composer").requestSubmit(); }
});
// the access token came in the URL: the server set a cookie, so take it out of the address bar
if (location.search.includes("token=")) history.replaceState(null, "", location.pathname);
loadTools().catch((e) => showError(String(e)));
render();
