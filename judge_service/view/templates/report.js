"use strict";
// The run report's one script: fixed text (its hash is in the page's CSP), it reads
// nothing from the data but the fragments the service rendered and escaped itself.
(function () {
  var table = document.getElementById("rows");
  var body = table.tBodies[0];
  var rows = Array.prototype.slice.call(body.rows);
  var panel = document.getElementById("trace");
  var query = document.getElementById("q");
  var which = document.getElementById("which");
  var shown = document.getElementById("shown");

  function inflate(base64) {
    var bytes = Uint8Array.from(atob(base64), function (c) { return c.charCodeAt(0); });
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text();
  }

  function open() {
    var hash = location.hash;
    var match = /^#r-(\d+)$/.exec(hash);
    var data = match && document.getElementById("d-" + match[1]);
    if (!data) {
      panel.hidden = true;
      panel.textContent = "";
      return;
    }
    // Rendered lazily: only the rollout asked for is inflated and parsed into the page.
    // The fragment is the service's own rendering, every value in it already escaped.
    inflate(data.textContent.trim()).then(function (html) {
      if (location.hash !== hash) return;  // another rollout was asked for meanwhile
      panel.innerHTML = '<p><a href="#table">back to the table</a></p>' + html;
      panel.hidden = false;
      panel.scrollIntoView();
    });
  }

  // Only the first `limit` matching rows are laid out: a browser lays out a 10,000-row
  // table in seconds, and every sort, filter or opened trace would pay it again.
  var PAGE = 500;
  var limit = PAGE;
  var more = document.getElementById("more");

  function filter() {
    var q = query.value.trim().toLowerCase();
    var w = which.value;
    var count = 0;
    rows.forEach(function (row) {
      var keep = (!q || row.dataset.s.indexOf(q) >= 0) &&
        (!w || (" " + row.dataset.f + " ").indexOf(" " + w + " ") >= 0);
      if (keep) count += 1;
      row.classList.toggle("off", !keep || count > limit);
    });
    var listed = Math.min(count, limit);
    shown.textContent = (listed < count ? "showing " + listed + " of " : "") +
      count + " of " + rows.length + " rollouts";
    more.hidden = listed >= count;
  }

  var sortedBy = -1;
  var descending = false;
  function sort(column, numeric) {
    descending = sortedBy === column ? !descending : numeric;
    sortedBy = column;
    var keyed = rows.map(function (row) {
      var cell = row.cells[column];
      var v = numeric ? parseFloat(cell.dataset.v) : cell.textContent;
      return [numeric && isNaN(v) ? null : v, row];
    });
    keyed.sort(function (a, b) {
      var x = a[0], y = b[0];
      if (x === y) return 0;
      if (x === null) return 1;
      if (y === null) return -1;
      var order = x < y ? -1 : 1;
      return descending ? -order : order;
    });
    rows = keyed.map(function (pair) { return pair[1]; });
    var fragment = document.createDocumentFragment();
    rows.forEach(function (row) { fragment.appendChild(row); });
    body.appendChild(fragment);
    filter();
  }

  more.addEventListener("click", function () {
    limit = Infinity;
    filter();
  });
  table.tHead.addEventListener("click", function (event) {
    var th = event.target.closest("th");
    if (th) sort(th.cellIndex, th.dataset.num === "1");
  });
  query.addEventListener("input", filter);
  which.addEventListener("change", filter);
  window.addEventListener("hashchange", open);
  filter();
  open();
})();
