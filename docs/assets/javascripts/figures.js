// Renders the course's plotly figures from their data-plotly attributes.
// - plotly.js (self-hosted, the bundle matching the site's plotly version) is loaded once,
//   only on pages that have a figure, after the page's load event, when the first figure nears
//   the viewport; each figure is drawn as it nears the viewport (see "lazy drawing");
// - works with Material's instant navigation: document$ emits on every page change, and
//   figures of the page navigated away from are purged;
// - follows the light/dark palette, re-rendering when the reader toggles it: every colour a
//   figure sets is mapped to a dark-mode counterpart (darkColor), defaults that plotly draws in
//   a fixed grey (error bars of bars, shapes, arrows) take the page's text colour;
// - fits the column: full width, axis titles and tick labels inside the figure (automargin),
//   legends below the plot; on a narrow figure (a phone) side-by-side panels are stacked, long
//   category labels wrap, the mode bar is hidden and the plot area keeps a minimum height; on
//   a wide one the mode bar shows on hover, in a margin of its own (course.css);
// - numbers with thousands separators, in ticks and hover labels; log axes say so in their title
//   and label their ticks with the full value;
// - readable without colour: lines and markers that set no dash or symbol get one of a cycle,
//   bars of a legend get a pattern;
// - hardware overlay: where the page's selected hardware set (html[data-course-hardware])
//   differs from the reference and the figure carries both (data-plotly-sets,
//   data-plotly-reference), the selected set is drawn solid and the reference dashed.
(function () {
  "use strict";
  var PLOTLY_SRC = new URL("plotly-basic-4.1.1.min.js", document.currentScript.src).href;
  var NARROW = 600;          // px: a figure narrower than this gets the phone layout
  var MIN_PLOT = 200;        // px: the least height of a plot area (per panel)
  var LIGHT_COLORWAY = ["#1f5fbf", "#e07b00", "#2e8b57", "#c62828", "#7b1fa2", "#00838f"];
  var DASHES = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"];
  var SYMBOLS = ["circle", "square", "diamond", "triangle-up", "x", "cross", "triangle-down", "star"];
  var PATTERNS = ["", "/", "\\", "x", ".", "+", "-", "|"];
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

  // ------------------------------------------------------------------ colours
  var canvas = null;
  function rgba(color) {
    // any CSS colour as [r, g, b, a] (0-255, alpha 0-1), or null
    if (typeof color !== "string") return null;
    if (!canvas) canvas = document.createElement("canvas").getContext("2d");
    canvas.fillStyle = "#010203";
    canvas.fillStyle = color;
    var s = canvas.fillStyle;
    if (s === "#010203" && color.replace(/\s/g, "").toLowerCase() !== "#010203") return null;
    if (s[0] === "#") return [parseInt(s.substr(1, 2), 16), parseInt(s.substr(3, 2), 16), parseInt(s.substr(5, 2), 16), 1];
    var m = s.match(/rgba?\(([^)]*)\)/);
    if (!m) return null;
    var v = m[1].split(",").map(parseFloat);
    return [v[0], v[1], v[2], v.length > 3 ? v[3] : 1];
  }

  function luminance(c) {
    var l = c.slice(0, 3).map(function (v) {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * l[0] + 0.7152 * l[1] + 0.0722 * l[2];
  }

  function contrast(a, b) {
    var x = luminance(a), y = luminance(b);
    return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05);
  }

  function toHsl(c) {
    var r = c[0] / 255, g = c[1] / 255, b = c[2] / 255;
    var max = Math.max(r, g, b), min = Math.min(r, g, b), l = (max + min) / 2, h = 0, s = 0;
    if (max !== min) {
      var d = max - min;
      s = l > 0.5 ? d / (2 - max - min) : d / (max + min);
      h = max === r ? (g - b) / d + (g < b ? 6 : 0) : max === g ? (b - r) / d + 2 : (r - g) / d + 4;
      h /= 6;
    }
    return [h, s, l];
  }

  function fromHsl(h, s, l, a) {
    function hue(p, q, t) {
      if (t < 0) t += 1;
      if (t > 1) t -= 1;
      if (t < 1 / 6) return p + (q - p) * 6 * t;
      if (t < 1 / 2) return q;
      if (t < 2 / 3) return p + (q - p) * (2 / 3 - t) * 6;
      return p;
    }
    var q = l < 0.5 ? l * (1 + s) : l + s - l * s, p = 2 * l - q;
    return [hue(p, q, h + 1 / 3), hue(p, q, h), hue(p, q, h - 1 / 3)].map(function (v) { return Math.round(v * 255); })
      .concat([a]);
  }

  function css(c) {
    return c[3] === 1 ? "rgb(" + c.slice(0, 3).join(",") + ")" : "rgba(" + c.join(",") + ")";
  }

  // The one map from a light-mode colour to its dark-mode counterpart: lightness moved into
  // the upper band (order kept, so a light and a dark shade of one hue stay apart), then raised
  // until the colour stands out from the background by 3:1 (WCAG's ratio for graphics).
  // Near-black and near-white greys swap roles (black text-like lines take the text colour).
  function darkColor(color, p) {
    var c = rgba(color);
    if (!c) return color;
    var hsl = toHsl(c);
    if (hsl[1] < 0.12 && hsl[2] < 0.3) return css(p.fgRgba.slice(0, 3).concat([c[3] * p.fgRgba[3]]));
    if (hsl[1] < 0.12 && hsl[2] > 0.9) return css(p.bgRgba.slice(0, 3).concat([c[3]]));
    var l = 0.4 + 0.45 * hsl[2], out = fromHsl(hsl[0], hsl[1], l, c[3]);
    while (contrast(out, p.bgRgba) < 3 && l < 0.95) {
      l += 0.03;
      out = fromHsl(hsl[0], hsl[1], l, c[3]);
    }
    return css(out);
  }

  // a theme colour as the browser resolves it (Material's are hsla() of var()s, which neither
  // plotly nor a canvas can read)
  function resolved(variable, fallback) {
    var probe = document.createElement("span");
    probe.style.display = "none";
    probe.style.color = fallback;
    probe.style.color = "var(" + variable + ", " + fallback + ")";
    document.body.appendChild(probe);
    var color = getComputedStyle(probe).color;
    probe.remove();
    return color || fallback;
  }

  function palette() {
    var fg = resolved("--md-default-fg-color", "#333");
    var grid = resolved("--md-default-fg-color--lightest", "#ddd");
    var bg = resolved("--md-default-bg-color", "#fff");
    var scheme = document.body.getAttribute("data-md-color-scheme") || "default";
    var p = { fg: fg, grid: grid, bg: bg, scheme: scheme, dark: scheme === "slate",
      fgRgba: rgba(fg) || [0, 0, 0, 0.87], bgRgba: rgba(bg) || [255, 255, 255, 1] };
    p.color = function (c) { return p.dark ? darkColor(c, p) : c; };
    p.colorway = LIGHT_COLORWAY.map(p.color);
    return p;
  }

  // every string (or list of strings) under a key that names a colour, mapped
  function recolor(obj, p) {
    if (Array.isArray(obj)) { obj.forEach(function (v) { recolor(v, p); }); return; }
    if (!obj || typeof obj !== "object") return;
    Object.keys(obj).forEach(function (k) {
      var v = obj[k];
      if (/colou?r$/i.test(k) && k !== "colorway" && typeof v === "string") obj[k] = p.color(v);
      else if (/colou?r$/i.test(k) && Array.isArray(v) && v.every(function (x) { return typeof x === "string"; })) {
        obj[k] = v.map(p.color);
      } else if (v && typeof v === "object" && k !== "colorscale") recolor(v, p);
    });
  }

  // ------------------------------------------------------------------ traces
  function styleKey(t, i) { return t.legendgroup || t.name || "trace " + i; }

  function modeOf(t) {
    if (t.mode) return t.mode;
    var n = (t.x && t.x.length) || (t.y && t.y.length) || 0;
    return n < 20 ? "lines+markers" : "lines";
  }

  // A dash for each line and a symbol for each marker that sets none, by legend entry, from
  // what no trace of the figure sets explicitly; a pattern for the bars of a legend of bars.
  function distinguish(data) {
    var usedDash = {}, usedSymbol = {}, bars = 0;
    data.forEach(function (t) {
      if (t.line && t.line.dash) usedDash[t.line.dash] = true;
      if (t.marker && typeof t.marker.symbol === "string") usedSymbol[t.marker.symbol] = true;
      if (t.type === "bar" && t.showlegend !== false && t.name) bars++;
    });
    var dashes = DASHES.filter(function (d) { return !usedDash[d]; });
    var symbols = SYMBOLS.filter(function (s) { return !usedSymbol[s]; });
    var given = {}, nDash = 0, nSymbol = 0, nPattern = 0;
    data.forEach(function (t, i) {
      var key = styleKey(t, i), g = given[key] || (given[key] = {});
      if (t.type === "bar") {
        if (bars < 2) return;
        t.marker = t.marker || {};
        if (!t.marker.pattern || !t.marker.pattern.shape) {
          if (g.pattern === undefined) g.pattern = PATTERNS[nPattern++ % PATTERNS.length];
          if (g.pattern) t.marker.pattern = Object.assign({ shape: g.pattern, fillmode: "overlay", fgopacity: 0.45, size: 7, solidity: 0.25 }, t.marker.pattern);
        }
        return;
      }
      if (t.type && t.type !== "scatter") return;
      var mode = modeOf(t);
      if (mode.indexOf("lines") >= 0 && !(t.line && t.line.dash) && dashes.length) {
        if (g.dash === undefined) g.dash = dashes[nDash++ % dashes.length];
        t.line = Object.assign({}, t.line, { dash: g.dash });
      }
      if (mode.indexOf("markers") >= 0 && !(t.marker && t.marker.symbol !== undefined) && symbols.length) {
        if (g.symbol === undefined) g.symbol = symbols[nSymbol++ % symbols.length];
        t.marker = Object.assign({}, t.marker, { symbol: g.symbol });
      }
    });
  }

  function themedData(data, p, width) {
    var out = JSON.parse(JSON.stringify(data || []));
    var legendChars = Math.max(24, Math.floor((width - 50) / 6.5));
    out.forEach(function (t) {
      // a legend entry longer than the figure is wide wraps (plotly's legend does not)
      if (typeof t.name === "string" && t.name.length > legendChars) t.name = wrap(t.name, legendChars);
      // plotly draws a bar's whiskers in a fixed dark grey: the text colour instead
      ["error_x", "error_y"].forEach(function (k) {
        if (t[k] && t[k].visible !== false && !t[k].color && t.type === "bar") t[k].color = p.fg;
      });
      // numbers in hover labels with thousands separators: %{y:.1f} -> %{y:,.1f}; %{y:.3g} ->
      // %{y:,.3r} (significant digits, never 1.23e+3)
      ["hovertemplate", "texttemplate"].forEach(function (k) {
        var sep = function (h) {
          return typeof h !== "string" ? h : h.replace(/%\{([^}:]+):\.(\d+)([fg])\}/g, function (m, v, n, type) {
            return "%{" + v + ":,." + n + (type === "g" ? "r" : "f") + "}";
          });
        };
        if (Array.isArray(t[k])) t[k] = t[k].map(sep); else if (t[k]) t[k] = sep(t[k]);
      });
      // a marker's outline that sets a width but no colour: the text colour, as for whiskers
      if (t.marker && t.marker.line && t.marker.line.width && !t.marker.line.color) t.marker.line.color = p.fg;
    });
    distinguish(out);
    recolor(out, p);
    return out;
  }

  // ------------------------------------------------------------------ layout
  function axisKeys(layout) {
    return Object.keys(layout).filter(function (k) { return /^[xy]axis\d*$/.test(k); });
  }

  function axisOf(t, letter) {
    var ref = t[letter + "axis"] || letter;
    return letter + "axis" + ref.slice(1);
  }

  // the categories a trace places on an axis (strings), in order of appearance
  function categories(data, key) {
    var seen = {}, out = [];
    data.forEach(function (t) {
      ["x", "y"].forEach(function (letter) {
        if (axisOf(t, letter) !== key) return;
        (Array.isArray(t[letter]) ? t[letter] : []).forEach(function (v) {  // numbers may come as {bdata}
          if (typeof v === "string" && !seen[v]) { seen[v] = true; out.push(v); }
        });
      });
    });
    return out;
  }

  // an axis's title, said to be on a log scale where the axis is and the title does not say so
  function titleText(ax) {
    var t = ax && ax.title && (typeof ax.title === "string" ? ax.title : ax.title.text);
    if (!t) return "";
    if (ax.type === "log" && !/\blog\b/i.test(t)) t += " (log scale)";
    return t;
  }

  function wrap(text, width) {
    return String(text).split("<br>").map(function (line) {
      var words = line.split(" "), lines = [], cur = "";
      words.forEach(function (w) {
        if (cur && (cur + " " + w).length > width) { lines.push(cur); cur = w; } else cur = cur ? cur + " " + w : w;
      });
      if (cur) lines.push(cur);
      return lines.join("<br>");
    }).join("<br>");
  }

  // 1 x N panels (make_subplots with one row): [{x: "xaxis2", y: "yaxis2"}, ...] left to right
  function panelsInARow(layout) {
    var xs = axisKeys(layout).filter(function (k) { return k[0] === "x" && layout[k].domain && !layout[k].overlaying; });
    if (xs.length < 2) return null;
    var panels = xs.map(function (k) {
      var anchor = layout[k].anchor || "y";
      return { x: k, y: "yaxis" + anchor.slice(1), from: layout[k].domain };
    });
    var rows = {};
    for (var i = 0; i < panels.length; i++) {
      var ya = layout[panels[i].y];
      if (!ya) return null;
      rows[JSON.stringify(ya.domain || [0, 1])] = true;
    }
    if (Object.keys(rows).length !== 1) return null;
    return panels.sort(function (a, b) { return a.from[0] - b.from[0]; });
  }

  // the subplot title make_subplots writes for a panel: a paper annotation centred above it
  function titleOf(out, pn) {
    var top = (out[pn.y].domain || [0, 1])[1], centre = (pn.from[0] + pn.from[1]) / 2;
    return (out.annotations || []).filter(function (a) {
      return a.xref === "paper" && a.yref === "paper" && a.showarrow === false && typeof a.text === "string" &&
        Math.abs(a.x - centre) < 0.02 && Math.abs(a.y - top) < 0.03;
    })[0] || null;
  }

  // Subplot titles wrap to their panel's width, with room above for their lines; on a narrow
  // figure, panels side by side become panels one above the other, their titles with them.
  function arrange(out, panels, width, narrow) {
    var titles = panels.map(function (pn) { return titleOf(out, pn); });
    var lines = titles.map(function (a, i) {
      if (!a) return 0;
      // centred over the plot area, which the y axis's labels push right of the figure's centre
      var px = narrow ? width - 110 : (panels[i].from[1] - panels[i].from[0]) * (width - 60);
      a.text = wrap(a.text, Math.max(12, Math.floor(px / (((a.font && a.font.size) || 16) * 0.55))));
      return a.text.split("<br>").length;
    });
    var most = Math.max.apply(null, lines.concat([1]));
    out.margin.t = Math.max(out.margin.t, 16 * (narrow ? lines[0] || 1 : most) + 12);
    if (!narrow) return;
    // between two panels: the upper one's tick labels and x title, the lower one's title
    var n = panels.length;
    out.height = Math.max(out.height || 450, n * 300 + 140);
    var paper = out.height - out.margin.t - 120;
    var gaps = lines.slice(1).map(function (l) { return (100 + 16 * Math.max(0, l - 1)) / paper; });
    var h = (1 - gaps.reduce(function (a, b) { return a + b; }, 0)) / n, hi = 1;
    panels.forEach(function (pn, i) {
      if (i > 0) hi -= h + gaps[i - 1];
      var lo = hi - h;
      if (titles[i]) { titles[i].x = 0.5; titles[i].y = hi; }
      out[pn.x] = Object.assign({}, out[pn.x], { domain: [0, 1] });
      out[pn.y] = Object.assign({}, out[pn.y], { domain: [lo, hi], showticklabels: true });
      // a panel of a shared y axis had its title on the first panel only: each gets it now
      if (i > 0 && !titleText(out[pn.y]) && titleText(out[panels[0].y])) out[pn.y].title = Object.assign({}, out[panels[0].y].title);
    });
    out._panelRows = n;
  }

  function themed(layout, data, p, width) {
    var out = JSON.parse(JSON.stringify(layout || {}));
    var narrow = width < NARROW;
    recolor(out, p);
    out.paper_bgcolor = "rgba(0,0,0,0)";
    out.plot_bgcolor = "rgba(0,0,0,0)";
    out.separators = ".,";
    out.font = Object.assign({}, out.font, { color: p.fg }, narrow ? { size: 11 } : {});
    out.colorway = p.colorway;
    out.hoverlabel = Object.assign({ font: { size: 12 } }, out.hoverlabel);
    // margins: only as much as the labels need (automargin grows them), and the top the
    // figure asked for (subplot titles and annotations above the plot sit there)
    var m = out.margin || {};
    out.margin = { l: 8, r: narrow ? 12 : Math.max(12, Math.min(m.r || 0, 30)), b: 8, t: Math.max(10, m.t || 0), autoexpand: true };
    if (!axisKeys(out).length) { out.xaxis = {}; out.yaxis = {}; }
    ["xaxis", "yaxis"].forEach(function (k) { if (!out[k]) out[k] = {}; });
    axisKeys(out).forEach(function (k) {
      var ax = out[k] = Object.assign({ gridcolor: p.grid, zerolinecolor: p.grid, linecolor: p.grid }, out[k]);
      ax.automargin = true;
      if (titleText(ax)) {
        // an x title to the width, a y title (turned) to the plot's height; settle() narrows
        // them further once the plot area is known
        ax.title = Object.assign({}, ax.title, { text: wrap(titleText(ax), Math.max(24, Math.round((k[0] === "x" ? width : (out.height || 450) * 0.6) / 7))) });
      }
      var cats = categories(data, k);
      var isCategory = ax.type === "category" || (!ax.type && cats.length);
      if (isCategory && !ax.ticktext && cats.length && !(k[0] === "x" && ax.tickangle)) {  // turned labels need no wrap
        // long category labels wrap: a y label to about a third of the width, an x label to its slot
        var chars = k[0] === "y" ? Math.max(14, Math.round(width * 0.3 / 6.5))
          : Math.max(8, Math.round(width / Math.max(1, cats.length) / 6.5));
        var wrapped = cats.map(function (c) { return wrap(c, chars); });
        if (wrapped.some(function (w, i) { return w !== cats[i]; })) {
          ax.tickmode = "array"; ax.tickvals = cats; ax.ticktext = wrapped;
        }
      } else if (!isCategory && !ax.tickformat && !ax.ticktext && ax.type !== "date" && !ax.exponentformat) {
        ax.exponentformat = "none";   // numbers written out with thousands separators: 2,048, not 2048 or 2.048k
        ax.separatethousands = true;
      }
    });
    // legends that sit below the plot: horizontal, anchored to the figure's bottom edge, so
    // that they never cover an axis title, however many rows they take
    var lg = out.legend = Object.assign({}, out.legend);
    if (narrow || (lg.orientation === "h" && (lg.y === undefined || lg.y < 0))) {
      out.legend = Object.assign(lg, { orientation: "h", x: 0, xanchor: "left", xref: "paper", y: 0, yanchor: "bottom", yref: "container" });
    }
    var panels = panelsInARow(out);
    if (panels) arrange(out, panels, width, narrow);
    // room above the plot, its titles and annotations for the mode bar, shown on hover (wide screens only)
    if (!narrow) { out.margin.t += 28; out.height = (out.height || 450) + 28; }
    // plotly draws shapes and arrows in a fixed dark grey unless told: the text colour instead
    (out.shapes || []).forEach(function (s) {
      s.line = Object.assign({}, s.line);
      if (!s.line.color) s.line.color = p.fg;
    });
    (out.annotations || []).forEach(function (a) {
      if (a.showarrow !== false && !a.arrowcolor) a.arrowcolor = p.fg;
      if (narrow) a.font = Object.assign({ size: 10 }, a.font);
    });
    out.autosize = true;
    delete out.width;
    return out;
  }

  // ------------------------------------------------------------------ hardware overlay
  // each trace's colour made explicit: the reference's as the colorway gives them by position,
  // and a trace of the selected set the colour of its reference counterpart (same name)
  function withColors(data, p, given) {
    return data.map(function (t, i) {
      t = JSON.parse(JSON.stringify(t));
      var key = t.name || t.legendgroup || "trace " + i;
      if (!(key in given.colors)) given.colors[key] = p.colorway[given.next++ % p.colorway.length];
      var c = given.colors[key];
      if (t.type === "bar") t.marker = Object.assign({ color: c }, t.marker);
      else {
        t.line = Object.assign({ color: (t.marker && typeof t.marker.color === "string" && t.marker.color) || c }, t.line);
        t.marker = Object.assign({ color: t.line.color }, t.marker);
      }
      return t;
    });
  }

  function asReference(t) {
    t.name = (t.name || "") + " (reference)";
    if (t.legendgroup) t.legendgroup += " (reference)";
    if (t.type === "bar") {
      t.marker = Object.assign({}, t.marker, { opacity: 0.45, pattern: { shape: "/", fillmode: "overlay", size: 6 } });
    } else {
      t.line = Object.assign({}, t.line, { dash: "dash" });
      t.opacity = 0.75;
      if (t.marker && typeof t.marker.symbol === "string" && !/-open$/.test(t.marker.symbol)) t.marker.symbol += "-open";
    }
    return t;
  }

  // Which sets a figure is drawn from now: the page's own set (data-plotly-hardware, else the
  // reference), or the selected one over the reference; {key} names it (data-drawn-hardware).
  function decide(el) {
    var setsText = el.getAttribute("data-plotly-sets");
    var ref = el.getAttribute("data-plotly-reference");
    var own = el.getAttribute("data-plotly-hardware") || ref;
    var selected = document.documentElement.dataset.courseHardware || own;
    var d = { own: own, ref: ref, selected: selected, sets: null, key: own || "" };
    if (!setsText || !ref || selected === own) return d;
    try { d.sets = JSON.parse(setsText); } catch (err) {
      console.error("figure " + el.parentNode.id + ": data-plotly-sets: " + err);
      return d;
    }
    if (!d.sets[selected]) return d;  // this figure has no data of the selected set: the page's own
    // a set measured at other sizes is drawn alone, on its own axes (setsAt below)
    d.key = selected === ref || setsAt(selected).otherSizes || (own !== ref && !d.sets[ref])
      ? selected : selected + " over " + ref;
    return d;
  }

  // ------------------------------------------------------------------ what the selected set can show
  // The page's set marker (hardware.js reads it too): each set's label, and the sets measured at
  // other sizes (a CPU's small ones), whose numbers share no axis with the reference's.
  function setsAt(hw) {
    var marker = document.querySelector(".hw-sets[data-hw-sets]"), info = null;
    try { info = marker && JSON.parse(marker.getAttribute("data-hw-sets")); } catch (err) { info = null; }
    var label = hw;
    ((info && info.sets) || []).forEach(function (s) { if (s[0] === hw) label = s[1]; });
    return { label: label, otherSizes: !!(info && (info.other_sizes || []).indexOf(hw) >= 0) };
  }

  // The figure's provenance line follows what is drawn: the selected set's own figure says whose
  // results it is drawn from (and, at other sizes, that its numbers do not compare with the
  // reference's); a figure the selected set has no data for says it shows the page's set.
  function followProvenance(el, d) {
    var line = el.parentNode && el.parentNode.querySelector(".provenance-line");
    if (!line) return;
    if (line._courseOriginal === undefined) line._courseOriginal = line.innerHTML;
    var note = "";
    if (d.selected && d.selected !== d.own) {
      var sel = setsAt(d.selected), own = setsAt(d.own);
      if (d.key === d.selected) {
        note = "Drawn from the results measured on " + sel.label +
          (sel.otherSizes ? ", at its own sizes: its numbers do not compare with those of " + own.label + "." : ".");
      } else if (d.key === d.selected + " over " + d.ref) {
        note = "Solid: measured on " + sel.label + "; dashed: " + setsAt(d.ref).label + ".";
      } else if (d.key === d.own) {
        note = sel.label + " has no results for this figure: it shows " + own.label + "'s.";
      }
    }
    if (!note) { line.innerHTML = line._courseOriginal; return; }
    line.textContent = note;
  }

  // the spec to draw: the page's own, or the selected hardware set's solid over the reference's dashed
  function chosenSpec(el, spec, p) {
    var d = decide(el), own = d.own, ref = d.ref, selected = d.selected, sets = d.sets;
    el.setAttribute("data-drawn-hardware", d.key);
    if (d.key === (own || "")) return spec;
    var pick = function (hw) { return hw === own ? spec : sets[hw]; };
    var mine = pick(selected), theirs = pick(ref);
    var layout = JSON.parse(JSON.stringify(mine.layout || spec.layout || {}));
    if (d.key === selected) return { data: mine.data, layout: layout };
    // two sets on one pair of axes: the ranges one set's figure fixed may not hold the other's
    axisKeys(layout).forEach(function (k) { delete layout[k].range; });
    var given = { colors: {}, next: 0 };
    var dashed = withColors(theirs.data, p, given).map(asReference);
    var solid = withColors(mine.data, p, given).map(function (t) {
      if (t.type !== "bar") t.line = Object.assign({}, t.line, { dash: "solid" });
      if (t.name) t.name = t.name + " (" + selected + ")";  // which set the solid traces are
      return t;
    });
    // bars: each set's bars side by side. A stack stays a stack per set; where no two bars of a set
    // share a place on the axis (one trace per bar), the sets take two slots, not one per trace
    var stacked = layout.barmode === "stack" || layout.barmode === "relative";
    var places = [];
    mine.data.forEach(function (t) {
      var at = t.orientation === "h" ? t.y : t.x;
      if (t.type === "bar") places = places.concat(Array.isArray(at) ? at.map(String) : [NaN]);
    });
    var alone = places.length && places.every(function (v, i) { return v === v && places.indexOf(v) === i; });
    if (stacked || alone) {
      solid.concat(dashed).forEach(function (t, i) {
        if (t.type === "bar") t.offsetgroup = (stacked ? t.offsetgroup || "" : "") + (i < solid.length ? " selected" : " reference");
      });
    }
    return { data: solid.concat(dashed), layout: layout };
  }

  // ------------------------------------------------------------------ lazy drawing
  // plotly.js (1.2 MB) and drawing a figure cost a throttled phone seconds: neither holds up the
  // page's load event. After it, a figure is drawn when it comes within NEAR of the viewport
  // (IntersectionObserver), and the first such figure fetches plotly.js. A figure that has not
  // been drawn keeps its room (course.css: .course-plot:not(.js-plotly-plot)).
  var NEAR = "1000px 0px 1000px 0px";  // about a phone screen above and below
  var watcher = null;

  function afterLoad(fn) {
    if (document.readyState === "complete") fn();  // instant navigation: long loaded
    else window.addEventListener("load", function () { fn(); }, { once: true });
  }

  // calls drawOne(el) for each of els once, when el nears the viewport; a new page's call stops the
  // previous page's watching
  var generation = 0;
  function lazily(els, drawOne) {
    var mine = ++generation;
    if (watcher) { watcher.disconnect(); watcher = null; }
    if (!els.length) return;
    afterLoad(function () {
      if (mine !== generation) return;  // the reader navigated on before the load event
      if (!("IntersectionObserver" in window)) { els.forEach(drawOne); return; }
      watcher = new IntersectionObserver(function (entries, obs) {
        entries.forEach(function (e) {
          if (!e.isIntersecting) return;
          obs.unobserve(e.target);
          drawOne(e.target);
        });
      }, { rootMargin: NEAR });
      els.forEach(function (el) { watcher.observe(el); });
    });
  }

  // ------------------------------------------------------------------ drawing
  // What can only be settled once plotly has laid the figure out, in one relayout:
  // - a plot area squeezed by its margins (legend rows, wrapped labels) gets its height back;
  // - a log axis the figure left to plotly's ticks shows no bare minor digits (a "3" that means
  //   3,000): labels written out in full, as many as the axis's length holds.
  function settle(el, Plotly, layout, extra) {
    var full = el._fullLayout;
    if (!full) return null;
    var update = {}, least = Infinity, charPx = (full.font.size || 12) * 0.56;
    Object.keys(full).forEach(function (k) {
      if (!/^[xy]axis\d*$/.test(k)) return;
      var ax = full[k], asked = layout[k] || {};
      if (k[0] === "y" && ax._length) least = Math.min(least, ax._length);
      // a title centred on its axis must not run past the figure: wrapped to the axis's length
      var text = titleText(asked).replace(/<br>/g, " "), fits = Math.max(12, Math.floor((ax._length || 0) / charPx));
      if (text && ax._length && asked.title.text.split("<br>").some(function (l) { return l.length > fits; })) {
        update[k + ".title.text"] = wrap(text, fits);
      }
      if (ax.type !== "log" || asked.dtick !== undefined || asked.tickvals || asked.tickformat) return;
      if (typeof ax.dtick !== "string" || ax.dtick[0] !== "D") return;
      // as many labels as fit the axis: at 1, 2 and 5 of each decade, or at each power of ten,
      // or at every other one; written out, and unlabelled minor ticks between
      var decades = Math.abs(ax.range[1] - ax.range[0]), labelPx = k[0] === "x" ? 48 : 24;
      update[k + ".tickformat"] = ",~r";
      if (decades * 3 * labelPx <= ax._length) {
        update[k + ".dtick"] = "D2";
      } else {
        update[k + ".dtick"] = decades * labelPx <= ax._length ? 1 : 2;
        update[k + ".minor"] = { ticks: "outside", ticklen: 3, showgrid: false, dtick: "D1" };
      }
    });
    if (least !== Infinity && least < MIN_PLOT) {
      update.height = Math.ceil(full.height + (MIN_PLOT - least) * (extra._panelRows || 1) + 4);
    }
    return Object.keys(update).length ? Plotly.relayout(el, update) : null;
  }

  // The plot is role="img" with the caption as its text alternative, so what is inside it is not
  // read out: the mode bar (a mouse tool on wide screens: zoom, pan, download) stays out of the
  // keyboard's tab order and out of the accessibility tree, as the rest of the drawing is.
  function quietModebar(el) {
    var bar = el.querySelector(".modebar-container");
    if (bar) bar.setAttribute("aria-hidden", "true");
    Array.prototype.forEach.call(el.querySelectorAll(".modebar-btn"), function (b) { b.tabIndex = -1; });
  }

  function draw(el, Plotly) {
    // one bad figure must not stop the others: report it and go on
    try {
      var p = palette();
      var spec = chosenSpec(el, JSON.parse(el.getAttribute("data-plotly")), p);
      followProvenance(el, decide(el));
      var width = el.clientWidth || (el.parentNode && el.parentNode.clientWidth) || 688;
      var narrow = width < NARROW;
      var data = themedData(spec.data, p, width);
      var layout = themed(spec.layout, data, p, width);
      var extra = { _panelRows: layout._panelRows };
      delete layout._panelRows;
      el._courseNarrow = narrow;
      return Promise.resolve(Plotly.react(el, data, layout, {
        responsive: true, displaylogo: false, displayModeBar: narrow ? false : "hover",
        modeBarButtonsToRemove: ["lasso2d", "select2d", "sendChartToCloud"]  // no upload to Plotly's cloud
      })).then(function () { return settle(el, Plotly, layout, extra); })
        .then(function () { quietModebar(el); })
        .then(function () { el.setAttribute("data-rendered-scheme", p.scheme); })
        .catch(function (err) { console.error("figure " + el.parentNode.id + ": " + err); });
    } catch (err) {
      console.error("figure " + el.parentNode.id + ": " + err);
      return Promise.resolve();
    }
  }

  // draw one figure of the page (plotly.js fetched for the first), and keep it for redraws
  function drawOne(el) {
    loadPlotly().then(function (Plotly) {
      if (!document.body.contains(el)) return;  // the reader navigated on while plotly.js loaded
      draw(el, Plotly);
      if (rendered.indexOf(el) < 0) rendered.push(el);
    }).catch(function (err) { console.error(err); });
  }

  function renderAll() {
    // purge figures of pages navigated away from
    rendered = rendered.filter(function (el) {
      if (document.body.contains(el)) return true;
      if (window.Plotly) window.Plotly.purge(el);
      return false;
    });
    var els = Array.prototype.slice.call(document.querySelectorAll(".course-plot"));
    lazily(els, drawOne);
  }

  function redrawAll() {
    if (window.Plotly && rendered.length) rendered.forEach(function (el) { draw(el, window.Plotly); });
  }

  new MutationObserver(redrawAll).observe(document.body, { attributes: true, attributeFilter: ["data-md-color-scheme"] });
  // a selected hardware set redraws the figures it changes (hardware.js sets it on every page, mostly unchanged)
  new MutationObserver(function () {
    if (window.Plotly) rendered.forEach(function (el) {
      if (document.body.contains(el) && decide(el).key !== el.getAttribute("data-drawn-hardware")) draw(el, window.Plotly);
    });
  }).observe(document.documentElement, { attributes: true, attributeFilter: ["data-course-hardware"] });

  // crossing the narrow width (a phone turned, a window resized) changes the layout, not only the size
  var resizeTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () {
      rendered.forEach(function (el) {
        if (window.Plotly && document.body.contains(el) && (el.clientWidth < NARROW) !== el._courseNarrow) draw(el, window.Plotly);
      });
    }, 200);
  });

  window.courseFigures = { draw: function (el) { return loadPlotly().then(function (P) { return draw(el, P); }); }, darkColor: darkColor };

  if (window.document$) window.document$.subscribe(renderAll);
  else document.addEventListener("DOMContentLoaded", renderAll);
})();
