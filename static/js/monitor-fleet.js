// Fleet overview: refresh the tiles from fleet.json every scrape interval while the tab is visible.
(function () {
  "use strict";
  const container = document.getElementById("fleet-tiles");
  const template = document.getElementById("tile-template");
  const updated = document.getElementById("fleet-updated");
  if (!container || !template) return;
  const intervalMs = Math.max(2, Number(container.dataset.interval) || 10) * 1000;

  function pct(value) { return value === null || value === undefined ? "–" : (value * 100).toFixed(1) + "%"; }
  function rate(value) { return value === null || value === undefined ? "–" : value.toFixed(2); }
  function tokens(value) {
    if (value === null || value === undefined) return "–";
    if (value >= 1e6) return (value / 1e6).toFixed(2) + "M";
    if (value >= 1e3) return (value / 1e3).toFixed(1) + "K";
    return String(Math.round(value));
  }
  function health(tile) {
    if (tile.state === "down") return "down: " + (tile.error || "");
    if (tile.age_s === null) return "never scraped";
    return Math.round(tile.age_s) + " s ago";
  }
  function set(element, field, text) {
    const target = element.querySelector('[data-field="' + field + '"]');
    if (target && target.textContent !== text) target.textContent = text;
  }

  function render(tile, element) {
    element.href = "/monitor/endpoints/" + tile.endpoint_id + "/";
    element.dataset.endpointId = String(tile.endpoint_id);
    element.dataset.engine = tile.engine;
    element.dataset.kvUsage = tile.kv_usage === null ? "" : String(tile.kv_usage);
    element.dataset.state = tile.state;
    element.className = "tile state-" + tile.state;
    set(element, "name", tile.name);
    set(element, "state", tile.state);
    set(element, "kv_pct", pct(tile.kv_usage));
    set(element, "kv_max_pct", pct(tile.kv_usage_max_5m));
    set(element, "waiting", tile.waiting === null ? "–" : String(tile.waiting));
    set(element, "running", tile.running === null ? "–" : String(tile.running));
    set(element, "preemptions", rate(tile.preemptions_per_s));
    set(element, "tokens", tokens(tile.kv_tokens_used) + " / " + tokens(tile.planned_kv_tokens));
    set(element, "saturation", tile.saturation);
    set(element, "scenario", tile.scenario || "no scenario");
    set(element, "node", tile.node);
    set(element, "health", health(tile));
    const meter = element.querySelector('[data-field="meter"]');
    if (meter) meter.value = tile.kv_usage === null ? 0 : Math.min(1, Math.max(0, tile.kv_usage));
  }

  function key(tile) { return tile.endpoint_id + ":" + tile.engine; }

  function apply(overview) {
    const existing = new Map();
    for (const element of container.querySelectorAll(".tile")) {
      existing.set(element.dataset.endpointId + ":" + element.dataset.engine, element);
    }
    const empty = document.getElementById("fleet-empty");
    if (empty && overview.tiles.length) empty.remove();
    overview.tiles.forEach(function (tile, index) {
      let element = existing.get(key(tile));
      if (!element) element = template.content.firstElementChild.cloneNode(true);
      existing.delete(key(tile));
      render(tile, element);
      if (container.children[index] !== element) container.insertBefore(element, container.children[index] || null);
    });
    for (const stale of existing.values()) stale.remove();
    if (updated) {
      updated.dateTime = overview.generated_at;
      updated.textContent = overview.generated_at.slice(11, 19);
    }
  }

  let timer = null;
  async function refresh() {
    try {
      const response = await fetch(container.dataset.source + window.location.search, {
        headers: { Accept: "application/json" }, credentials: "same-origin",
      });
      if (response.ok) apply(await response.json());
    } catch (error) {
      // The server is away for a moment: keep the last tiles and try again next time.
    }
  }
  function schedule() {
    clearInterval(timer);
    timer = null;
    if (!document.hidden) {
      refresh();
      timer = setInterval(refresh, intervalMs);
    }
  }
  document.addEventListener("visibilitychange", schedule);
  for (const select of document.querySelectorAll("#fleet-filters select")) {
    select.addEventListener("change", function () { select.form.submit(); });
  }
  timer = setInterval(refresh, intervalMs);
})();
