// Upload: files dropped on the drop zone go into the form's file input; after the upload,
// each accepted file's status is polled until it is ready or failed (after a re-ingest,
// the document's page then loads again).
"use strict";
(function () {
  const drop = document.getElementById("drop");
  const input = document.getElementById("files");
  if (drop && input) {
    for (const name of ["dragenter", "dragover"]) {
      drop.addEventListener(name, function (event) {
        event.preventDefault();
        drop.classList.add("over");
      });
    }
    drop.addEventListener("dragleave", function () {
      drop.classList.remove("over");
    });
    drop.addEventListener("drop", function (event) {
      event.preventDefault();
      drop.classList.remove("over");
      input.files = event.dataTransfer.files;
    });
  }

  const DONE = ["ready", "failed"];

  async function follow(row) {
    const state = row.querySelector(".state");
    const bar = row.querySelector("progress");
    const labels = JSON.parse(row.dataset.labels);
    while (!DONE.includes(state.dataset.state)) {
      await new Promise(function (resolve) { setTimeout(resolve, 1000); });
      try {
        const response = await fetch(row.dataset.statusUrl, { credentials: "same-origin" });
        if (!response.ok) continue;
        const report = await response.json();
        state.dataset.state = report.status;
        state.textContent = (labels[report.status] || report.status)
          + (report.error_code ? " " + report.error_code + ": " + (report.error_detail || "") : "");
        const pct = report.status === "ready" ? 100 : Math.round(report.progress || 0);
        bar.value = pct;
        bar.textContent = pct + "%";
      } catch (err) {
        // the server restarting: try again on the next tick
      }
    }
    // a re-ingested document's page: load it again to show the new version's text and chunks
    if (row.dataset.doneUrl) location.replace(row.dataset.doneUrl);
  }

  for (const row of document.querySelectorAll("tr[data-status-url]")) follow(row);
})();
