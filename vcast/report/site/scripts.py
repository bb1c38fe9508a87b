"""The results site's little scripts (plain JavaScript, no framework), each a string that
:func:`vcast.report.site.html.page` puts in a ``script`` element at the end of a page. A page reads
without them: every table and answer is in the HTML, sorting, filtering and picking aside; only
the kept maps need :data:`KEPT_MAPS` to appear."""

# Sorting the report's tables by a click on a header: descending, ascending, then the report's own
# order again; the leading number of a cell ("62.6 ± 1.2") is its value, section rows hide while sorted.
SORT = """\
document.querySelectorAll("table.sortable").forEach(function (table) {
  var body = table.tBodies[0], original = Array.from(body.rows);
  table.querySelectorAll("thead th").forEach(function (th, column) {
    th.addEventListener("click", function () {
      var order = {"": "desc", "desc": "asc", "asc": ""}[th.getAttribute("data-order") || ""];
      table.querySelectorAll("thead th").forEach(function (other) { other.removeAttribute("data-order"); });
      if (order) { th.setAttribute("data-order", order); }
      var value = function (row) {
        var text = row.cells[column] ? row.cells[column].textContent : "";
        var number = parseFloat(text);
        return isNaN(number) ? text.toLowerCase() : number;
      };
      var rows = original.filter(function (row) { return !row.classList.contains("section"); });
      if (order) {
        rows.sort(function (a, b) {
          var x = value(a), y = value(b), less = (typeof x === typeof y) ? x < y : typeof x === "number";
          var more = (typeof x === typeof y) ? x > y : typeof y === "number";
          return (order === "asc" ? 1 : -1) * (less ? -1 : more ? 1 : 0);
        });
      }
      original.forEach(function (row) { row.hidden = Boolean(order) && row.classList.contains("section"); });
      (order ? rows : original).forEach(function (row) { body.appendChild(row); });
    });
  });
});
"""

# The item page's method picker: what a checkbox leaves unchecked (its answer row, kept map, curve and
# legend entry, all tagged data-method) is hidden; applied on load and on every change.
PICK = """\
(function () {
  var boxes = Array.from(document.querySelectorAll("input.pick"));
  function apply() {
    var shown = {};
    boxes.forEach(function (box) { shown[box.value] = box.checked; });
    document.querySelectorAll("[data-method]").forEach(function (element) {
      var key = element.getAttribute("data-method");
      if (key in shown) {
        if (shown[key]) { element.removeAttribute("hidden"); element.style.display = ""; }
        else { element.setAttribute("hidden", ""); element.style.display = "none"; }
      }
    });
  }
  boxes.forEach(function (box) { box.addEventListener("change", apply); });
  apply();
})();
"""

# A tiny filter for long tables (the item list): rows whose text lacks the typed words are hidden.
FILTER = """\
document.querySelectorAll("input.filter").forEach(function (box) {
  var table = document.getElementById(box.getAttribute("data-table"));
  box.addEventListener("input", function () {
    var words = box.value.toLowerCase().split(/\\s+/).filter(Boolean);
    table.querySelectorAll("tbody tr").forEach(function (row) {
      var text = row.textContent.toLowerCase();
      row.hidden = !words.every(function (w) { return text.indexOf(w) >= 0; });
    });
  });
});
"""

# The item page's kept maps, drawn where the reader looks: each canvas.kept-map names the shared sheet
# of its item's frames (data-sheet), how its tiles lie (data-tiles "columns width height gap
# frames-per-step count": tile i at column i % columns, row i / columns, a frame of shown step
# i / frames-per-step), its token grid (data-grid "h w") and, per shown step, the kept tokens in hex
# (data-kept: row-major bits, most significant first). Dropped tokens' cells are dimmed the way
# vcast.viz.kept_frames dims them (pixel * dim; cell edges as vcast.viz.cell_edges rounds them).
# A canvas is drawn once, when it comes near the viewport: a hidden (unpicked) method costs nothing.
KEPT_MAPS = """\
(function () {
  function edge(pixels, cells, index) { return Math.floor((2 * index * pixels + cells) / (2 * cells)); }
  function keptBits(hex, count) {
    var bits = [];
    for (var i = 0; i < count; i++) { bits.push(((parseInt(hex.charAt(i >> 2), 16) >> (3 - (i & 3))) & 1) === 1); }
    return bits;
  }
  function numbers(canvas, name) { return canvas.getAttribute(name).split(" ").map(Number); }
  function draw(canvas) {
    if (canvas.getAttribute("data-drawn")) { return; }
    canvas.setAttribute("data-drawn", "loading");
    var image = new Image();
    image.onload = function () {
      var tiles = numbers(canvas, "data-tiles"), grid = numbers(canvas, "data-grid"), h = grid[0], w = grid[1];
      var columns = tiles[0], tileW = tiles[1], tileH = tiles[2], gap = tiles[3], perStep = tiles[4];
      var steps = canvas.getAttribute("data-kept").split(" ").map(function (hex) { return keptBits(hex, h * w); });
      canvas.width = image.naturalWidth;
      canvas.height = image.naturalHeight;
      var context = canvas.getContext("2d");
      context.drawImage(image, 0, 0);
      context.fillStyle = "rgba(0, 0, 0, " + (1 - Number(canvas.getAttribute("data-dim"))) + ")";
      for (var tile = 0; tile < tiles[5]; tile++) {
        var left = (tile % columns) * (tileW + gap), top = Math.floor(tile / columns) * (tileH + gap);
        var kept = steps[Math.floor(tile / perStep)];
        for (var i = 0; i < h; i++) {
          for (var j = 0; j < w; j++) {
            if (kept[i * w + j]) { continue; }
            var x = edge(tileW, w, j), y = edge(tileH, h, i);
            context.fillRect(left + x, top + y, edge(tileW, w, j + 1) - x, edge(tileH, h, i + 1) - y);
          }
        }
      }
      canvas.setAttribute("data-drawn", "yes");
    };
    image.onerror = function () { canvas.setAttribute("data-drawn", "failed"); };
    image.src = canvas.getAttribute("data-sheet");
  }
  var maps = Array.from(document.querySelectorAll("canvas.kept-map"));
  if (!("IntersectionObserver" in window)) { maps.forEach(draw); return; }
  var observer = new IntersectionObserver(function (entries) {
    entries.forEach(function (entry) {
      if (entry.isIntersecting) { observer.unobserve(entry.target); draw(entry.target); }
    });
  }, {rootMargin: "600px"});
  maps.forEach(function (canvas) { observer.observe(canvas); });
})();
"""
