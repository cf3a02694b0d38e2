// The overview's ingestion activity, refreshed without a reload: polls the JSON the
// server renders the panel from (the REST /api/status report) every few seconds.
"use strict";
(function () {
  const table = document.getElementById("activity");
  if (!table) return;
  const body = table.tBodies[0];
  const source = table.dataset.source;

  function cell(row, text) {
    const td = row.insertCell();
    td.textContent = text;
    return td;
  }

  const seen = new Map(); // document_id -> [time, progress] of the first poll that saw it

  // Time left at the rate this page has watched the document progress (no rate yet: blank).
  function eta(r) {
    const now = Date.now() / 1000;
    const first = seen.get(r.document_id);
    if (!first) {
      seen.set(r.document_id, [now, r.progress || 0]);
      return "";
    }
    const rate = ((r.progress || 0) - first[1]) / (now - first[0]);
    if (!(rate > 0)) return "";
    const left = Math.round((100 - (r.progress || 0)) / rate);
    return left < 90 ? "~" + left + " s" : "~" + Math.round(left / 60) + " min";
  }

  // The table sources' rows (state, indexed, pending, failed, lag, reason), by name.
  function renderSources(sources) {
    for (const s of sources || []) {
      const row = Array.from(document.querySelectorAll("#sources tr[data-source]")).find(
        (r) => r.dataset.source === s.name,
      );
      if (!row) continue; // a source added since the page loaded: shown on the next load
      const cells = row.cells;
      const reason = s.failure || (s.failed_rows || []).map((f) => f.code + ": " + f.reason)[0];
      const values = [s.state, s.rows_indexed, s.pending, s.rows_failed,
        Number(s.lag_seconds).toFixed(1) + " s", reason || ""];
      values.forEach((v, i) => { cells[i + 2].textContent = String(v); });
    }
  }

  function render(report) {
    for (const el of document.querySelectorAll("[data-count]")) {
      el.textContent = String(report.counts[el.dataset.count] ?? 0);
    }
    renderSources(report.sources);
    const rows = report.processing.concat(report.failed);
    body.replaceChildren();
    if (rows.length === 0) {
      const td = cell(body.insertRow(), table.dataset.idle);
      td.colSpan = 5;
      return;
    }
    for (const r of rows) {
      const row = body.insertRow();
      const link = document.createElement("a");
      link.href = "/console/documents/" + encodeURIComponent(r.document_id);
      link.textContent = r.path;
      row.insertCell().append(link);
      cell(row, r.status);
      const bar = document.createElement("progress");
      bar.max = 100;
      bar.value = r.progress || 0;
      bar.textContent = Math.round(r.progress || 0) + "%";
      row.insertCell().append(bar);
      cell(row, r.status === "failed" ? "" : eta(r));
      cell(row, [r.error_code, r.error_detail].filter(Boolean).join(" "));
    }
  }

  async function poll() {
    try {
      const response = await fetch(source, { credentials: "same-origin" });
      if (response.ok) render(await response.json());
    } catch (err) {
      // the server restarting: try again on the next tick
    }
  }

  setInterval(poll, 3000);
})();
