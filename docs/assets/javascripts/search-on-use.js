// The search index on first use of search, not on every page's load.
// Material's bundle requests search/search_index.json (XMLHttpRequest) as it starts, on every page,
// and hands it to its search worker; on a phone that is a large download and a parse that compete
// with the page itself. This script (overrides/main.html loads it before the bundle) holds that one
// request back until the reader first reaches for search: a tap or click on the search field or
// its button, focus in the field, or Material's search keys (f, s, /) outside a text field. A page
// opened from a search result (?h=...) highlights the terms, which needs the index: it is sent at once.
// Until then the search box says it is initialising, as it does while any index loads.
(function () {
  "use strict";
  var INDEX = /\/search\/search_index\.json(?:[?#]|$)/;
  var open = XMLHttpRequest.prototype.open;
  var send = XMLHttpRequest.prototype.send;
  var held = [];
  var used = false;

  XMLHttpRequest.prototype.open = function (method, url) {
    this.__courseSearchIndex = INDEX.test(String(url));
    return open.apply(this, arguments);
  };
  XMLHttpRequest.prototype.send = function () {
    if (this.__courseSearchIndex && !used) {
      held.push([this, arguments]);
      return undefined;
    }
    return send.apply(this, arguments);
  };

  function use() {
    if (used) return;
    used = true;
    held.splice(0).forEach(function (h) { send.apply(h[0], h[1]); });
    ["pointerdown", "focusin", "keydown", "change"].forEach(function (type) {
      document.removeEventListener(type, onEvent, true);
    });
  }

  function typing(el) {
    return el && (el.isContentEditable || /^(input|textarea|select)$/i.test(el.tagName));
  }

  function onEvent(event) {
    var t = event.target;
    if (event.type === "keydown") {
      if (!typing(t) && /^[fs/]$/i.test(event.key) && !event.ctrlKey && !event.metaKey && !event.altKey) use();
      return;
    }
    if (t && t.closest && t.closest("[data-md-component=search], label[for=__search], #__search")) use();
  }

  ["pointerdown", "focusin", "keydown", "change"].forEach(function (type) {
    document.addEventListener(type, onEvent, true);
  });
  if (/[?&]h=/.test(location.search)) use();
  window.courseSearch = { use: use, used: function () { return used; } };
})();
