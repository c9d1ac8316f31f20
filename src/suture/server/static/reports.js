// The reports page: lists `suture eval` folders the server was given (--reports) and
// shows one report.md, rendered by the server, with its plots fetched through the API.
"use strict";

const $ = (id) => document.getElementById(id);

function showError(error) {
  if (!askForKeyIfNeeded(error, $("key-label"), $("api-key"), $("status"))) {
    $("status").textContent = error.message;
    $("status").classList.add("error");
  }
}

async function showReport(name) {
  try {
    const { html } = await apiJson("GET", "/v1/reports/view?name=" + encodeURIComponent(name));
    // Rendered by the server from Markdown with raw HTML escaped.
    $("report").innerHTML = html;
    $("status").textContent = name;
    for (const image of $("report").querySelectorAll("img")) {
      const source = image.getAttribute("src");
      if (!source.startsWith("/v1/reports/file?")) continue;
      const blob = await (await api("GET", source)).blob();
      image.src = URL.createObjectURL(blob);
      image.dataset.loaded = "true";
    }
    document.body.dataset.shown = name; // for tests: this report is on the page
  } catch (error) {
    showError(error);
  }
}

async function start() {
  try {
    const { reports } = await apiJson("GET", "/v1/reports");
    if (!reports.length) {
      $("status").textContent =
        "No reports: start the server with --reports FOLDER (a `suture eval --out` folder " +
        "or a folder of them).";
      return;
    }
    $("report-list").replaceChildren(...reports.map((name) => {
      const link = document.createElement("a");
      link.href = "#" + encodeURIComponent(name);
      link.textContent = name;
      link.onclick = () => showReport(name);
      const item = document.createElement("li");
      item.append(link);
      return item;
    }));
    const wanted = decodeURIComponent(location.hash.slice(1));
    await showReport(reports.includes(wanted) ? wanted : reports[0]);
  } catch (error) {
    showError(error);
  }
}

start();
