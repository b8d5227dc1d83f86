/* The activity charts of the admin: every section.fdbqueue-activity draws the JSON at its data-url
   with Chart.js, and fetches it again every data-refresh seconds (no page reload). */
(function () {
  "use strict";
  if (window.fdbqueueActivity) { return; }  // the include may appear more than once on a page
  var COLORS = {
    pushed: "#417690", popped: "#79aec8", claimed: "#c4a000", acked: "#44a047",
    failed: "#e67e22", dead: "#ba2121", depth: "#417690", age: "#a05c9c"
  };

  function label(seconds, span) {
    var d = new Date(seconds * 1000);
    var hh = String(d.getHours()).padStart(2, "0"), mm = String(d.getMinutes()).padStart(2, "0");
    return span === "day" ? hh + ":00" : hh + ":" + mm;
  }

  function dataset(name, values, extra) {
    var set = { label: name, data: values, borderColor: COLORS[name], backgroundColor: COLORS[name],
                borderWidth: 2, pointRadius: 0, tension: 0.2, spanGaps: true };
    return Object.assign(set, extra || {});
  }

  function options(twoAxes) {
    var scales = { x: { ticks: { maxTicksLimit: 6, autoSkip: true } },
                   y: { beginAtZero: true, ticks: { precision: 0 } } };
    if (twoAxes) {
      scales.y1 = { beginAtZero: true, position: "right", grid: { drawOnChartArea: false },
                    title: { display: true, text: "age (s)" }, ticks: { precision: 0 } };
    }
    return { responsive: true, maintainAspectRatio: false, animation: false,
             interaction: { mode: "index", intersect: false },
             plugins: { legend: { position: "bottom", labels: { boxWidth: 12 } } }, scales: scales };
  }

  function Panel(section) {
    this.section = section;
    this.url = section.getAttribute("data-url");
    this.refresh = Math.max(1, parseFloat(section.getAttribute("data-refresh")) || 5) * 1000;
    this.span = section.getAttribute("data-span") || "hour";
    this.status = section.querySelector(".fdbqueue-activity-status");
    this.throughput = new Chart(section.querySelector(".fdbqueue-chart-throughput"),
                                { type: "line", data: { labels: [], datasets: [] }, options: options(false) });
    this.depth = new Chart(section.querySelector(".fdbqueue-chart-depth"),
                           { type: "line", data: { labels: [], datasets: [] }, options: options(true) });
    this.updates = 0;
    var self = this;
    section.querySelectorAll(".fdbqueue-span").forEach(function (button) {
      button.addEventListener("click", function () { self.choose(button.getAttribute("data-span")); });
    });
  }

  Panel.prototype.choose = function (span) {
    this.span = span;
    this.section.setAttribute("data-span", span);
    this.section.querySelectorAll(".fdbqueue-span").forEach(function (b) {
      b.setAttribute("aria-pressed", String(b.getAttribute("data-span") === span));
    });
    this.load();
  };

  Panel.prototype.draw = function (data) {
    var labels = data.buckets.map(function (s) { return label(s, data.span); });
    var series = data.total;
    this.throughput.data.labels = labels;
    this.throughput.data.datasets = data.counters.map(function (name) { return dataset(name, series[name]); });
    this.throughput.update();
    this.depth.data.labels = labels;
    this.depth.data.datasets = [dataset("depth", series.depth, { pointRadius: 2 }),
                                dataset("age", series.age, { yAxisID: "y1", pointRadius: 2 })];
    this.depth.update();
    this.updates += 1;
    this.section.setAttribute("data-updates", String(this.updates));
    this.section.setAttribute("data-pushed", String(series.pushed.reduce(function (a, b) { return a + b; }, 0)));
    this.status.textContent = "Updated " + new Date().toLocaleTimeString();
  };

  Panel.prototype.load = function () {
    var self = this;
    var url = this.url + (this.url.indexOf("?") < 0 ? "?" : "&") + "span=" + encodeURIComponent(this.span);
    return fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.json();
      })
      .then(function (data) { if (data.span === self.span) { self.draw(data); } })
      .catch(function (error) { self.status.textContent = "Could not update: " + error.message; });
  };

  Panel.prototype.start = function () {
    var self = this;
    this.load();
    this.timer = window.setInterval(function () { if (!document.hidden) { self.load(); } }, this.refresh);
  };

  function start() {
    var panels = [];
    document.querySelectorAll("section.fdbqueue-activity").forEach(function (section) {
      var panel = new Panel(section);
      panels.push(panel);
      panel.start();
    });
    window.fdbqueueActivity.panels = panels;
  }

  window.fdbqueueActivity = { panels: [] };
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
