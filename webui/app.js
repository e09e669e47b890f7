/* The chat page of `cllm serve`: conversations kept in the browser's
 * localStorage, replies streamed from /v1/chat/completions (fetch and a
 * ReadableStream over its server-sent events) and drawn as Markdown with
 * highlighted code as they arrive. Stop aborts the fetch; the server sees the
 * connection close, aborts the request and frees its KV blocks. Under each
 * reply: tokens, tokens/s, time to first token and the prompt tokens the
 * server's prefix cache held (usage.prompt_tokens_details.cached_tokens).
 * With `--api-key`, the first 401 opens a dialog for the key, which is kept
 * in localStorage and sent as a Bearer token from then on. */
"use strict";

const STORE = {
  conversations: "cllm.conversations", // [{id, title, messages: [{role, content, stats?, error?}]}]
  current: "cllm.current",             // id of the conversation shown
  settings: "cllm.settings",           // {system, temperature, top_p, max_tokens, ignore_eos}
  apiKey: "cllm.apiKey",
};
const UNTITLED = "New chat";

const $ = (id) => document.getElementById(id);

function loadJson(key, fallback) {
  try {
    const text = localStorage.getItem(key);
    return text === null ? fallback : JSON.parse(text);
  } catch (err) {
    return fallback; // unreadable (an older page's data): start afresh
  }
}

function saveJson(key, value) {
  try {
    localStorage.setItem(key, JSON.stringify(value));
  } catch (err) {
    showStatus("cannot save in the browser's storage: " + err.message);
  }
}

function showStatus(text) {
  $("status").textContent = text;
}

/* ---- the API key ---- */

let keyRequest = null; // a pending dialog, shared by the requests that wait for it

function authHeaders() {
  const key = localStorage.getItem(STORE.apiKey);
  return key ? { Authorization: "Bearer " + key } : {};
}

function askForKey(message) {
  if (keyRequest) return keyRequest;
  keyRequest = new Promise((resolve, reject) => {
    const dialog = $("key-dialog");
    $("key-message").textContent = message;
    $("key-input").value = "";
    $("key-form").onsubmit = (ev) => {
      ev.preventDefault();
      const key = $("key-input").value.trim();
      if (!key) return;
      localStorage.setItem(STORE.apiKey, key);
      $("forget-key").hidden = false;
      keyRequest = null;
      dialog.close();
      resolve();
    };
    dialog.oncancel = () => {
      keyRequest = null;
      reject(new Error("no API key given"));
    };
    dialog.showModal();
    $("key-input").focus();
  });
  return keyRequest;
}

/* fetch with the key; a 401 asks for the key and tries again. */
async function api(path, options = {}) {
  for (;;) {
    const headers = Object.assign({}, options.headers || {}, authHeaders());
    const resp = await fetch(path, Object.assign({}, options, { headers }));
    if (resp.status !== 401) return resp;
    const refused = localStorage.getItem(STORE.apiKey) !== null;
    localStorage.removeItem(STORE.apiKey);
    await askForKey(refused ? "The server refused the API key; enter it again." : "This server needs an API key.");
  }
}

async function errorText(resp) {
  const text = await resp.text();
  try {
    return `${resp.status}: ${JSON.parse(text).error.message}`;
  } catch (err) {
    return `${resp.status}: ${text || resp.statusText}`;
  }
}

/* ---- the model ---- */

let modelId = null;
let modelReady = null; // a promise of modelId

function loadModel() {
  modelReady = (async () => {
    for (;;) {
      try {
        const resp = await api("/v1/models");
        if (resp.ok) {
          const body = await resp.json();
          // The first model that chats: an embedding model (task "embed") serves /v1/embeddings only.
          const chat = body.data.find((m) => m.task !== "embed");
          if (!chat) {
            showStatus("This server has no model that generates text; it serves embeddings only.");
            return null;
          }
          modelId = chat.id;
          $("model-name").textContent = modelId;
          showStatus("");
          return modelId;
        }
        showStatus(await errorText(resp)); // e.g. 503 while the model loads
      } catch (err) {
        showStatus(err.message);
      }
      await new Promise((done) => setTimeout(done, 1000));
    }
  })();
  return modelReady;
}

/* ---- Markdown ---- */

const HTML_ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]);
}

const renderer = new marked.Renderer();
/* A reply is text from a model: raw HTML in it is shown, never run. */
renderer.html = (html) => escapeHtml(html);
/* Links only to web and mail addresses; images as their alt text (the page
 * fetches nothing a reply names). */
const markedLink = renderer.link.bind(renderer);
renderer.link = (href, title, text) => (/^(https?:|mailto:)/i.test(href || "") ? markedLink(href, title, text) : text);
renderer.image = (href, title, text) => escapeHtml(text || "");
marked.setOptions({
  renderer,
  gfm: true,
  langPrefix: "hljs language-",
  highlight(code, lang) {
    try {
      if (lang && hljs.getLanguage(lang)) return hljs.highlight(lang, code, true).value;
      return hljs.highlightAuto(code).value;
    } catch (err) {
      return escapeHtml(code);
    }
  },
});

function renderMarkdown(element, text) {
  element.innerHTML = marked.parse(text);
  for (const a of element.querySelectorAll("a")) {
    a.target = "_blank";
    a.rel = "noopener noreferrer";
  }
}

/* ---- conversations ---- */

let conversations = loadJson(STORE.conversations, []);
let currentId = loadJson(STORE.current, null);

function persist() {
  saveJson(STORE.conversations, conversations);
  saveJson(STORE.current, currentId);
}

function currentConversation() {
  return conversations.find((c) => c.id === currentId);
}

function newConversation() {
  const c = { id: Date.now().toString(36) + Math.random().toString(36).slice(2, 8), title: UNTITLED, messages: [] };
  conversations.unshift(c);
  currentId = c.id;
  persist();
  renderAll();
  $("input").focus();
}

function deleteConversation(id) {
  conversations = conversations.filter((c) => c.id !== id);
  if (currentId !== id) {
    // Another one than the conversation shown (which may be streaming): only the list changes.
    persist();
    return renderConversationList();
  }
  currentId = conversations.length ? conversations[0].id : null;
  if (!currentConversation()) return newConversation();
  persist();
  renderAll();
}

function renderConversationList() {
  const list = $("conversations");
  list.replaceChildren();
  for (const c of conversations) {
    const item = document.createElement("li");
    item.className = c.id === currentId ? "current" : "";
    item.dataset.id = c.id;
    const title = document.createElement("button");
    title.type = "button";
    title.className = "title";
    title.textContent = c.title;
    title.onclick = () => {
      if (busy()) return;
      currentId = c.id;
      persist();
      renderAll();
    };
    const del = document.createElement("button");
    del.type = "button";
    del.className = "delete";
    del.title = "Delete this conversation";
    del.textContent = "×";
    del.disabled = busy() && c.id === currentId;
    del.onclick = () => deleteConversation(c.id);
    item.append(title, del);
    list.append(item);
  }
}

function formatStats(s) {
  const parts = [`${s.completion_tokens} tokens`];
  if (s.tokens_per_s !== null) parts.push(`${s.tokens_per_s.toFixed(1)} tokens/s`);
  if (s.ttft_ms !== null) parts.push(`first token ${Math.round(s.ttft_ms)} ms`);
  if (s.prompt_tokens !== null) parts.push(`prompt ${s.prompt_tokens} tokens, ${s.cached_tokens ?? 0} cached`);
  if (s.finish_reason) parts.push(s.finish_reason);
  return parts.join(" · ");
}

/* A message's element; an assistant's content is Markdown, a user's plain text. */
function messageView(m) {
  const view = document.createElement("div");
  view.className = "msg " + m.role;
  const content = document.createElement("div");
  content.className = "content";
  view.append(content);
  fillMessageView(view, m);
  return view;
}

function fillMessageView(view, m) {
  const content = view.querySelector(".content");
  if (m.role === "assistant") renderMarkdown(content, m.content);
  else content.textContent = m.content;
  view.querySelector(".error")?.remove();
  view.querySelector(".stats")?.remove();
  if (m.error) {
    const error = document.createElement("div");
    error.className = "error";
    error.textContent = m.error;
    view.append(error);
  }
  if (m.stats) {
    const stats = document.createElement("div");
    stats.className = "stats";
    stats.textContent = formatStats(m.stats);
    view.append(stats);
  }
}

function renderMessages() {
  const box = $("messages");
  box.replaceChildren(...(currentConversation()?.messages || []).map(messageView));
  box.scrollTop = box.scrollHeight;
}

function renderAll() {
  renderConversationList();
  renderMessages();
}

/* ---- settings ---- */

const SETTING_INPUTS = {
  system: "system-prompt",
  temperature: "temperature",
  top_p: "top-p",
  max_tokens: "max-tokens",
};

function loadSettings() {
  const saved = loadJson(STORE.settings, {});
  for (const [name, id] of Object.entries(SETTING_INPUTS)) if (saved[name] !== undefined) $(id).value = saved[name];
  $("ignore-eos").checked = !!saved.ignore_eos;
}

function readSettings() {
  const s = {};
  for (const [name, id] of Object.entries(SETTING_INPUTS)) s[name] = $(id).value;
  s.ignore_eos = $("ignore-eos").checked;
  return s;
}

/* The sampling fields of a request; an empty box leaves the server's default. */
function samplingFields(s) {
  const fields = {};
  const number = (text) => (text.trim() === "" ? null : Number(text));
  if (number(s.temperature) !== null) fields.temperature = number(s.temperature);
  if (number(s.top_p) !== null) fields.top_p = number(s.top_p);
  if (number(s.max_tokens) !== null) fields.max_tokens = Math.round(number(s.max_tokens));
  if (s.ignore_eos) fields.ignore_eos = true;
  return fields;
}

/* ---- streaming a reply ---- */

let controller = null; // the AbortController of the reply being streamed

function busy() {
  return controller !== null;
}

function setBusy(on) {
  $("send").disabled = on;
  $("stop").disabled = !on;
  renderConversationList();
}

/* The server-sent events of a response body: parsed JSON, or "[DONE]". */
async function* sseEvents(body) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let pending = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    pending += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
    let end;
    while ((end = pending.indexOf("\n\n")) >= 0) {
      const block = pending.slice(0, end);
      pending = pending.slice(end + 2);
      const data = block
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).replace(/^ /, ""))
        .join("\n");
      if (data) yield data === "[DONE]" ? data : JSON.parse(data);
    }
  }
}

/* The messages a request carries: the conversation, less the exchanges whose
 * reply failed before any text (chat templates want the roles to alternate). */
function historyOf(messages) {
  const history = [];
  for (const m of messages) {
    if (m.role === "assistant" && m.error && !m.content) {
      if (history.length && history[history.length - 1].role === "user") history.pop();
      continue;
    }
    history.push({ role: m.role, content: m.content });
  }
  return history;
}

async function send(text) {
  const conv = currentConversation();
  conv.messages.push({ role: "user", content: text });
  if (conv.title === UNTITLED) conv.title = text.slice(0, 48);
  const history = historyOf(conv.messages);
  const reply = { role: "assistant", content: "" };
  conv.messages.push(reply);
  persist();
  controller = new AbortController();
  setBusy(true);
  renderMessages();
  const box = $("messages");
  const view = box.lastElementChild;
  view.classList.add("streaming");

  const settings = readSettings();
  const messages = settings.system.trim() ? [{ role: "system", content: settings.system }, ...history] : history;
  const t0 = performance.now();
  let tFirst = null;
  let pieces = 0; // content deltas: the token count when a stopped reply gets no usage
  let usage = null;
  let finish = null;
  let drawn = true;
  const draw = () => {
    drawn = true;
    renderMarkdown(view.querySelector(".content"), reply.content);
    box.scrollTop = box.scrollHeight;
  };
  try {
    await modelReady;
    const body = { model: modelId, messages, stream: true, stream_options: { include_usage: true } };
    Object.assign(body, samplingFields(settings));
    const resp = await api("/v1/chat/completions", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
      signal: controller.signal,
    });
    if (!resp.ok) throw new Error(await errorText(resp));
    for await (const event of sseEvents(resp.body)) {
      if (event === "[DONE]") break;
      if (event.error) throw new Error(event.error.message);
      if (event.usage) usage = event.usage;
      for (const choice of event.choices || []) {
        const delta = choice.delta?.content;
        if (delta) {
          if (tFirst === null) tFirst = performance.now();
          reply.content += delta;
          pieces++;
          if (drawn) {
            drawn = false;
            requestAnimationFrame(draw); // at most one Markdown pass per frame
          }
        }
        if (choice.finish_reason) finish = choice.finish_reason;
      }
    }
  } catch (err) {
    if (err.name === "AbortError") finish = "stopped";
    else reply.error = err.message;
  }
  const tEnd = performance.now();
  const tokens = usage ? usage.completion_tokens : pieces;
  reply.stats = {
    completion_tokens: tokens,
    // tokens after the first over the time after the first: the decoding speed
    tokens_per_s: tFirst !== null && tokens > 1 && tEnd > tFirst ? ((tokens - 1) * 1000) / (tEnd - tFirst) : null,
    ttft_ms: tFirst !== null ? tFirst - t0 : null,
    prompt_tokens: usage ? usage.prompt_tokens : null,
    cached_tokens: usage ? usage.prompt_tokens_details?.cached_tokens ?? 0 : null,
    finish_reason: finish,
  };
  controller = null;
  view.classList.remove("streaming");
  fillMessageView(view, reply);
  box.scrollTop = box.scrollHeight;
  persist();
  setBusy(false);
}

/* ---- wiring ---- */

function submit() {
  const text = $("input").value;
  if (!text.trim() || busy()) return;
  $("input").value = "";
  send(text);
}

$("composer").onsubmit = (ev) => {
  ev.preventDefault();
  submit();
};
$("input").onkeydown = (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
    ev.preventDefault();
    submit();
  }
};
$("stop").onclick = () => controller?.abort();
$("new-chat").onclick = () => {
  if (!busy()) newConversation();
};
$("forget-key").onclick = () => {
  localStorage.removeItem(STORE.apiKey);
  $("forget-key").hidden = true;
};
for (const id of [...Object.values(SETTING_INPUTS), "ignore-eos"])
  $(id).addEventListener("change", () => saveJson(STORE.settings, readSettings()));

loadSettings();
$("forget-key").hidden = localStorage.getItem(STORE.apiKey) === null;
if (!currentConversation()) newConversation();
else renderAll();
loadModel();
