/* Results table: sort by a column, filter rows, download the shown rows as CSV. (Plots use plotly only.) */
(function () {
  "use strict";
  var table = document.getElementById("results-table");
  if (!table) { return; }
  var body = table.tBodies[0];
  var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
  var rows = Array.prototype.slice.call(body.rows);
  var filter = document.getElementById("results-filter");
  var count = document.getElementById("results-count");
  var total = rows.length;
  var sortCol = -1, sortDir = 1;

  heads.forEach(function (th, i) {
    if (th.getAttribute("data-type") === "num") {
      rows.forEach(function (r) { r.cells[i].className = "n"; });
    }
  });

  function cellValue(row, i, numeric) {
    var t = row.cells[i].textContent;
    if (numeric) { var v = parseFloat(t); return isNaN(v) ? -Infinity : v; }
    return t.toLowerCase();
  }

  function sortBy(i) {
    sortDir = (sortCol === i) ? -sortDir : 1;
    sortCol = i;
    var numeric = heads[i].getAttribute("data-type") === "num";
    var keyed = rows.map(function (r, k) { return [cellValue(r, i, numeric), k, r]; });
    keyed.sort(function (a, b) {
      if (a[0] < b[0]) { return -sortDir; }
      if (a[0] > b[0]) { return sortDir; }
      return a[1] - b[1];
    });
    rows = keyed.map(function (x) { return x[2]; });
    var frag = document.createDocumentFragment();
    rows.forEach(function (r) { frag.appendChild(r); });
    body.appendChild(frag);
    heads.forEach(function (th, k) {
      th.classList.remove("asc", "desc");
      th.removeAttribute("aria-sort");
      if (k === i) {
        th.classList.add(sortDir > 0 ? "asc" : "desc");
        th.setAttribute("aria-sort", sortDir > 0 ? "ascending" : "descending");
      }
    });
  }

  heads.forEach(function (th, i) {
    th.addEventListener("click", function () { sortBy(i); });
    th.addEventListener("keydown", function (e) { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortBy(i); } });
  });

  function shown() { return rows.filter(function (r) { return !r.hidden; }); }

  var texts = new Map(rows.map(function (r) { return [r, r.textContent.toLowerCase()]; }));

  function applyFilter() {
    var terms = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    rows.forEach(function (r) {
      var text = texts.get(r);
      var hide = !terms.every(function (t) { return text.indexOf(t) >= 0; });
      if (r.hidden !== hide) { r.hidden = hide; }
    });
    count.textContent = shown().length + " of " + total + " rows";
  }
  filter.addEventListener("input", applyFilter);

  function csvField(s) { return /[",\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s; }

  function shownCsv() {
    var lines = [heads.map(function (th) { return csvField(th.textContent); }).join(",")];
    shown().forEach(function (r) {
      lines.push(Array.prototype.map.call(r.cells, function (c) { return csvField(c.textContent); }).join(","));
    });
    return lines.join("\n") + "\n";
  }
  window.collsimShownCsv = shownCsv;

  document.getElementById("results-download").addEventListener("click", function () {
    var blob = new Blob([shownCsv()], { type: "text/csv" });
    var a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = "results-shown.csv";
    document.body.appendChild(a);
    a.click();
    setTimeout(function () { URL.revokeObjectURL(a.href); a.remove(); }, 0);
  });
}());
