// The hardware selector: which measured set the page's numbers come from, without a rebuild.
// - coursekit/mdext.py writes, on every page that shows a measured number, a hidden marker
//   (div.hw-sets, data-hw-sets: every set with its label, the page's own set and the reference); on
//   each measured value, data-hw: its text on each other set that measured it; on each claim that
//   fails somewhere, data-hw-fails: the sets;
// - this script puts a labelled <select> at the top of the article, swaps the values' text and marks
//   on change (a set that lacks a value shows the reference's, marked as borrowed), shows the claims
//   that fail on the selected set, and remembers the choice (localStorage) across pages and visits;
// - the selected set is also <html data-course-hardware="...">, and a "course:hardware" event on
//   document, for figures.js to draw that set's traces beside the reference's;
// - works with Material's instant navigation: document$ emits on every page change.
(function () {
  "use strict";
  var KEY = "course-hardware";
  var original = new WeakMap();  // element -> its text, title and fallback mark as built (the page's set)

  function remembered() {
    try { return window.localStorage.getItem(KEY); } catch (err) { return null; }
  }

  function remember(hw) {
    try { window.localStorage.setItem(KEY, hw); } catch (err) { /* private mode: this page only */ }
  }

  function setText(el, text) {
    // the value's own text node, so that markup another script added inside it survives
    for (var n = el.firstChild; n; n = n.nextSibling) {
      if (n.nodeType === 3 && n.nodeValue.trim()) { n.nodeValue = text; return; }
    }
    el.textContent = text;
  }

  function ownText(el) {
    for (var n = el.firstChild; n; n = n.nextSibling) {
      if (n.nodeType === 3 && n.nodeValue.trim()) return n.nodeValue;
    }
    return el.textContent;
  }

  function showValues(info, hw) {
    var labels = info.labels;
    document.querySelectorAll("[data-hw]").forEach(function (el) {
      // the page's own set on a number never changed: nothing to write (a write to every number
      // would cost a phone a relayout of the page before its load event)
      if (hw === info.page && !original.has(el)) return;
      var values;
      try { values = JSON.parse(el.getAttribute("data-hw")); } catch (err) { return; }
      if (!original.has(el)) {
        original.set(el, { text: ownText(el), title: el.getAttribute("title") || "",
                           fallback: el.classList.contains("fallback") });
      }
      var o = original.get(el);
      if (hw === info.page) {
        setText(el, o.text);
        el.setAttribute("title", o.title);
        el.classList.toggle("fallback", o.fallback);
        el.classList.remove("other-set");
        return;
      }
      var own = Object.prototype.hasOwnProperty.call(values, hw);
      var text = own ? values[hw]
        : (info.reference !== info.page && values[info.reference] !== undefined ? values[info.reference] : o.text);
      setText(el, text);
      el.classList.toggle("fallback", !own);
      el.classList.toggle("other-set", own);  // the selected set's own number, in prose written for the page's
      el.setAttribute("title", (own
        ? "on " + labels[hw]
        : "not measured on " + labels[hw] + ": the " + labels[info.reference] + " value") +
        ". Spread and provenance of the " + labels[info.page] + " value: " + o.title);
    });
  }

  // A claim the selected set does not bear out gets one mark per paragraph (or list item): the
  // first on the page says so in full, the others in three words; the claim itself is the mark's
  // title. A page's marks never repeat the sentence.
  function showClaims(info, hw) {
    var shown = [], first = true;
    document.querySelectorAll("[data-hw-fails]").forEach(function (el) {
      var fails = el.getAttribute("data-hw-fails").split(/\s+/).indexOf(hw) >= 0;
      var block = el.closest("p, li, td, .admonition, details") || el.parentNode;
      if (fails && shown.indexOf(block) >= 0) fails = false;  // this paragraph is marked already
      var text = "";
      if (fails) {
        shown.push(block);
        text = first ? "[not borne out on " + info.labels[hw] + ": a claim of this paragraph fails on its measurements]"
          : "[not borne out]";
        first = false;
      }
      if (el.hidden === !fails && el.textContent === text) return;  // unchanged: no write
      el.hidden = !fails;
      el.textContent = text;
    });
  }

  function select(info, hw, store) {
    if (!Object.prototype.hasOwnProperty.call(info.labels, hw)) hw = info.page;
    showValues(info, hw);
    showClaims(info, hw);
    var sel = document.getElementById("hw-select");
    if (sel) sel.value = hw;
    var note = document.getElementById("hw-note");
    if (note) {
      // one line, also on a phone (course.css): the rest in its title
      note.textContent = hw === info.page ? "" : "Tinted: measured on " + info.labels[hw] + ". Grey, dashed: not measured there.";
      note.title = hw === info.page ? "" : "The words were written for " + info.labels[info.page] + "'s numbers. A tinted " +
        "number was measured on " + info.labels[hw] + "; a grey number with a dashed underline was not, and shows " +
        info.labels[info.reference] + "'s. A claim its numbers do not bear out is marked.";
    }
    if (store) remember(hw);
    document.documentElement.setAttribute("data-course-hardware", hw);
    document.dispatchEvent(new CustomEvent("course:hardware",
      { detail: { hardware: hw, page: info.page, reference: info.reference } }));
  }

  function selector(info) {
    var box = document.createElement("div");
    box.className = "hw-select";
    var label = document.createElement("label");
    label.setAttribute("for", "hw-select");
    label.textContent = "Numbers from";
    var sel = document.createElement("select");
    sel.id = "hw-select";
    sel.title = "Which hardware set the page's measured numbers and figures show";
    info.sets.forEach(function (s) {
      var opt = document.createElement("option");
      opt.value = s[0];
      opt.textContent = s[1];
      sel.appendChild(opt);
    });
    sel.addEventListener("change", function () { select(info, sel.value, true); });
    var note = document.createElement("span");
    note.id = "hw-note";
    note.className = "hw-note";
    note.setAttribute("aria-live", "polite");
    box.appendChild(label);
    box.appendChild(document.createTextNode(" "));
    box.appendChild(sel);
    box.appendChild(note);
    return box;
  }

  function setUp() {
    var marker = document.querySelector(".hw-sets[data-hw-sets]");
    var article = document.querySelector("article.md-content__inner");
    if (!marker || !article) {
      document.documentElement.removeAttribute("data-course-hardware");
      return;
    }
    var info;
    try { info = JSON.parse(marker.getAttribute("data-hw-sets")); } catch (err) {
      console.error("hardware sets: " + err);
      return;
    }
    info.labels = {};
    info.sets.forEach(function (s) { info.labels[s[0]] = s[1]; });
    if (!document.getElementById("hw-select")) article.insertBefore(selector(info), article.firstChild);
    select(info, remembered() || info.page, false);
  }

  window.courseHardware = {
    // the selected set, for figures.js: <html data-course-hardware>, else none (a page of one set)
    selected: function () { return document.documentElement.getAttribute("data-course-hardware"); }
  };

  if (window.document$) window.document$.subscribe(setUp);
  else document.addEventListener("DOMContentLoaded", setUp);
})();
