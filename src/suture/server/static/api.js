// Calls to the suture API from the pages, with the API key the user typed (if the
// server needs one). Kept in sessionStorage: gone when the tab closes.
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

async function api(method, path, body) {
  const headers = {};
  const key = apiKey();
  if (key) headers["Authorization"] = "Bearer " + key;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) {
    let code = "http_error", message = response.statusText;
    try {
      const error = await response.json();
      code = error.error; message = error.message;
    } catch (ignored) { /* not JSON: keep the status text */ }
    throw new ApiError(response.status, code, message);
  }
  return response;
}

async function apiJson(method, path, body) {
  return (await api(method, path, body)).json();
}

// Shows the key field when the server answers 401; returns true when it did.
function askForKeyIfNeeded(error, label, input, status) {
  if (!(error instanceof ApiError) || error.status !== 401) return false;
  label.hidden = false;
  input.value = apiKey();
  input.onchange = () => { setApiKey(input.value.trim()); location.reload(); };
  status.textContent = "This server needs an API key: type it above.";
  status.classList.add("error");
  return true;
}
