// Calls to the suture API from the pages, with the API key the user typed (if the
// server needs one). Kept in sessionStorage: for this tab while it is open, sent only
// in the Authorization header, never in a URL.
"use strict";

const KEY_STORAGE = "suture-api-key";

function apiKey() {
  return sessionStorage.getItem(KEY_STORAGE) || "";
}

function setApiKey(value) {
  if (value) sessionStorage.setItem(KEY_STORAGE, value);
  else sessionStorage.removeItem(KEY_STORAGE);
}

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// The server's own words for an error: suture's {error, message}, or a framework's
// {detail} (a string or a list of problems); the HTTP status text when there are none.
function errorMessage(body, fallback) {
  if (body && typeof body.message === "string" && body.message) return body.message;
  if (body && typeof body.detail === "string" && body.detail) return body.detail;
  if (body && Array.isArray(body.detail)) {
    return body.detail.map((d) => (d && d.msg) || JSON.stringify(d)).join("; ");
  }
  return fallback;
}

async function api(method, path, body) {
  const headers = {};
  const key = apiKey();
  if (key) headers["Authorization"] = "Bearer " + key;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) {
    let code = "http_error", parsed = null;
    try {
      parsed = await response.json();
      if (parsed && parsed.error) code = parsed.error;
    } catch (ignored) { /* not JSON: keep the status text */ }
    const fallback = `${response.status} ${response.statusText}`.trim();
    throw new ApiError(response.status, code, errorMessage(parsed, fallback));
  }
  return response;
}

async function apiJson(method, path, body) {
  return (await api(method, path, body)).json();
}

// On a 401: shows the key field and says why, quietly when no key was given yet, with
// the server's own message (e.g. "unknown API key") when one was. Returns true then.
function askForKeyIfNeeded(error, label, input, status) {
  if (!(error instanceof ApiError) || error.status !== 401) return false;
  const tried = apiKey();
  label.hidden = false;
  input.value = tried;
  if (input.form === null) {  // the reports page: a lone field, read on change
    input.onchange = () => { setApiKey(input.value.trim()); location.reload(); };
  }
  status.textContent = tried ? error.message : "This server needs an API key: enter it above.";
  status.classList.toggle("error", Boolean(tried));
  if (tried) setApiKey("");
  input.focus();
  return true;
}
