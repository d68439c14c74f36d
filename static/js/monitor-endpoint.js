// Endpoint page: draw the six charts from charts.json, switch ranges, and refresh while the tab is visible.
(function () {
  "use strict";
  const holder = document.getElementById("endpoint-charts");
  if (!holder || !window.Plotly) return;
  const status = document.getElementById("range-status");
  const picker = document.getElementById("range-picker");
  const custom = document.getElementById("custom-range");
  let query = "range=1h";
  let timer = null;
  const config = { responsive: true, displaylogo: false };

  function pressed(range) {
    for (const button of picker.querySelectorAll("button[data-range]")) {
      const on = button.dataset.range === range;
      button.setAttribute("aria-pressed", on ? "true" : "false");
      button.classList.toggle("primary", on);
    }
  }

  async function load() {
    let response;
    try {
      response = await fetch(holder.dataset.source + "?" + query, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    } catch (error) {
      if (status) status.textContent = "kvdash is not answering; retrying";
      return;
    }
    const body = await response.json();
    if (!response.ok) {
      if (status) status.textContent = (body.range || ["bad range"]).join(" ");
      return;
    }
    for (const [id, figure] of Object.entries(body.figures)) {
      const element = document.getElementById(id);
      if (element) Plotly.react(element, figure.data, figure.layout, config);
    }
    holder.dataset.loadedRange = body.range;
    holder.dataset.start = body.start;
    holder.dataset.end = body.end;
    const up = document.getElementById("endpoint-up");
    if (up) {
      up.textContent = body.up === true ? "up" : body.up === false ? "down" : "not scraped yet";
      up.className = "badge " + (body.up === true ? "ok" : body.up === false ? "bad" : "warn");
    }
    const error = document.getElementById("endpoint-error");
    if (error) error.textContent = body.last_error || "";
    const saturation = document.getElementById("endpoint-saturation");
    if (saturation) saturation.textContent = body.saturation;
    if (status) status.textContent = "";
  }

  function every() {
    // Longer windows change slowly: refresh them less often.
    const range = holder.dataset.loadedRange || "1h";
    return { "15m": 10, "1h": 10, "6h": 30, "24h": 60, "7d": 300 }[range] * 1000 || 60000;
  }
  function schedule() {
    clearTimeout(timer);
    if (document.hidden) return;
    timer = setTimeout(async function () { await load(); schedule(); }, every());
  }

  picker.addEventListener("click", async function (event) {
    const button = event.target.closest("button[data-range]");
    if (!button || button.dataset.range === "custom") return;
    query = "range=" + encodeURIComponent(button.dataset.range);
    pressed(button.dataset.range);
    await load();
    schedule();
  });
  custom.addEventListener("submit", async function (event) {
    event.preventDefault();
    const start = new Date(custom.elements.start.value);
    const end = new Date(custom.elements.end.value);
    if (isNaN(start) || isNaN(end)) return;
    query = "start=" + encodeURIComponent(start.toISOString()) + "&end=" + encodeURIComponent(end.toISOString());
    pressed("custom");
    await load();
    schedule();
  });
  document.addEventListener("visibilitychange", function () { if (!document.hidden) { load(); } schedule(); });
  load().then(schedule);
})();
