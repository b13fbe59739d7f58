// Renders the course's plotly figures from their data-plotly attributes.
// - plotly.js (self-hosted, the bundle matching the site's plotly version) is loaded once,
//   and only on pages that have a figure;
// - works with Material's instant navigation: document$ emits on every page change, and
//   figures of the page navigated away from are purged;
// - follows the light/dark palette, re-rendering when the reader toggles it.
(function () {
  "use strict";
  var PLOTLY_SRC = new URL("plotly-basic-4.1.1.min.js", document.currentScript.src).href;
  var loading = null;
  var rendered = [];

  function loadPlotly() {
    if (window.Plotly) return Promise.resolve(window.Plotly);
    if (!loading) {
      loading = new Promise(function (resolve, reject) {
        var s = document.createElement("script");
        s.src = PLOTLY_SRC;
        s.onload = function () { resolve(window.Plotly); };
        s.onerror = function () { reject(new Error("could not load " + PLOTLY_SRC)); };
        document.head.appendChild(s);
      });
    }
    return loading;
  }

  function palette() {
    var style = getComputedStyle(document.body);
    var fg = style.getPropertyValue("--md-default-fg-color").trim() || "#333";
    var grid = style.getPropertyValue("--md-default-fg-color--lightest").trim() || "#ddd";
    var scheme = document.body.getAttribute("data-md-color-scheme") || "default";
    return { fg: fg, grid: grid, scheme: scheme };
  }

  function themed(layout, p) {
    var out = JSON.parse(JSON.stringify(layout || {}));
    out.paper_bgcolor = "rgba(0,0,0,0)";
    out.plot_bgcolor = "rgba(0,0,0,0)";
    out.font = Object.assign({}, out.font, { color: p.fg });
    out.colorway = p.scheme === "slate"
      ? ["#82b1ff", "#ffb74d", "#81c784", "#e57373", "#ba68c8", "#4dd0e1"]
      : ["#1f5fbf", "#e07b00", "#2e8b57", "#c62828", "#7b1fa2", "#00838f"];
    Object.keys(out).forEach(function (k) {
      if (/^[xy]axis\d*$/.test(k)) {
        out[k] = Object.assign({ gridcolor: p.grid, zerolinecolor: p.grid, linecolor: p.grid }, out[k]);
      }
    });
    if (!out.xaxis) out.xaxis = { gridcolor: p.grid, zerolinecolor: p.grid };
    if (!out.yaxis) out.yaxis = { gridcolor: p.grid, zerolinecolor: p.grid };
    out.autosize = true;
    return out;
  }

  function draw(el, Plotly) {
    // one bad figure must not stop the others: report it and go on
    try {
      var spec = JSON.parse(el.getAttribute("data-plotly"));
      var p = palette();
      return Promise.resolve(Plotly.react(el, spec.data, themed(spec.layout, p), {
        responsive: true, displaylogo: false, modeBarButtonsToRemove: ["lasso2d", "select2d"]
      })).then(function () { el.setAttribute("data-rendered-scheme", p.scheme); })
        .catch(function (err) { console.error("figure " + el.parentNode.id + ": " + err); });
    } catch (err) {
      console.error("figure " + el.parentNode.id + ": " + err);
      return Promise.resolve();
    }
  }

  function renderAll() {
    // purge figures of pages navigated away from
    rendered = rendered.filter(function (el) {
      if (document.body.contains(el)) return true;
      if (window.Plotly) window.Plotly.purge(el);
      return false;
    });
    var els = Array.prototype.slice.call(document.querySelectorAll(".course-plot"));
    if (!els.length) return;
    loadPlotly().then(function (Plotly) {
      els.forEach(function (el) {
        if (!document.body.contains(el)) return;  // the reader navigated on while plotly.js loaded
        draw(el, Plotly);
        if (rendered.indexOf(el) < 0) rendered.push(el);
      });
    }).catch(function (err) { console.error(err); });
  }

  new MutationObserver(function () {
    if (window.Plotly && rendered.length) rendered.forEach(function (el) { draw(el, window.Plotly); });
  }).observe(document.body, { attributes: true, attributeFilter: ["data-md-color-scheme"] });

  if (window.document$) window.document$.subscribe(renderAll);
  else document.addEventListener("DOMContentLoaded", renderAll);
})();
