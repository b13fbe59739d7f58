/* Where a number came from, on any screen; and boxes that scroll sideways, said so.
 *
 * A measured or cited number (coursekit/mdext.py: <span class="measured" title="…" tabindex="0"
 * role="button">) shows its title in a popover on a tap, a click, Enter or Space; Escape, a tap
 * elsewhere or moving the focus away closes it. A mouse still gets the native hover title while
 * the popover is closed. A tap on an abbreviation (abbr title: the glossary) shows its expansion
 * the same way. One popover element, appended to <body>, serves every page: listeners sit
 * on the document, so Material's instant navigation needs nothing but a close.
 *
 * A table or code box wider than the column scrolls inside it: it becomes focusable (a keyboard
 * scrolls it; axe's scrollable-region-focusable) and its edges fade where there is more to see
 * (course.css: course-scrolls-left / -right).
 */
(() => {
  const NUMBERS = ".md-typeset .measured, .md-typeset .cited";
  // an abbreviation's expansion (the glossary) opens on a tap too: a phone has no hover
  const TAPPABLE = `${NUMBERS}, .md-typeset abbr[title]`;
  let pop = null;
  let owner = null;

  function popover() {
    if (!pop || !pop.isConnected) {
      pop = document.createElement("div");
      pop.id = "course-provenance";
      pop.className = "course-provenance";
      pop.setAttribute("role", "tooltip");
      pop.tabIndex = -1; // a click inside (to select its text) keeps it open
      pop.hidden = true;
      document.body.appendChild(pop);
    }
    return pop;
  }

  function place(el) {
    const p = popover();
    const r = el.getBoundingClientRect();
    const width = document.documentElement.clientWidth;
    p.style.left = "0px";
    p.style.top = "0px";
    const w = p.offsetWidth;
    const h = p.offsetHeight;
    const left = Math.max(8, Math.min(r.left, width - w - 8));
    const below = r.bottom + 6 + h <= window.innerHeight || r.top - 6 - h < 0;
    p.style.left = `${left + window.scrollX}px`;
    p.style.top = `${(below ? r.bottom + 6 : r.top - 6 - h) + window.scrollY}px`;
  }

  function open(el) {
    close();
    const text = el.getAttribute("title") || el.dataset.provenance || "";
    if (!text) return;
    const p = popover();
    // one note a line: "median of 3 samples; min–max …; measured by … on …"
    p.replaceChildren(
      ...text.split("; ").map((line) => {
        const div = document.createElement("div");
        div.textContent = line;
        return div;
      }),
    );
    el.dataset.provenance = text;
    el.removeAttribute("title"); // no native tooltip on top of the popover
    if (el.matches(NUMBERS)) {
      el.setAttribute("aria-expanded", "true");
      el.setAttribute("aria-describedby", p.id);
    }
    owner = el;
    p.hidden = false;
    place(el);
  }

  function close() {
    if (owner) {
      if (owner.dataset.provenance) owner.setAttribute("title", owner.dataset.provenance);
      if (owner.matches(NUMBERS)) owner.setAttribute("aria-expanded", "false");
      owner.removeAttribute("aria-describedby");
    }
    owner = null;
    if (pop) pop.hidden = true;
  }

  document.addEventListener("click", (event) => {
    const el = event.target.closest?.(TAPPABLE);
    if (el) {
      if (el === owner) close();
      else open(el);
    } else if (owner && !(pop && pop.contains(event.target))) {
      close();
    }
  });

  document.addEventListener("keydown", (event) => {
    const el = event.target.closest?.(NUMBERS);
    if (el && (event.key === "Enter" || event.key === " ")) {
      event.preventDefault(); // Space would scroll the page
      if (el === owner) close();
      else open(el);
    } else if (event.key === "Escape" && owner) {
      const back = owner;
      close();
      back.focus();
    }
  });

  document.addEventListener("focusout", (event) => {
    if (!owner) return;
    const next = event.relatedTarget;
    const inside = (node) => node && (node === owner || (pop && pop.contains(node)));
    if ((event.target === owner || (pop && pop.contains(event.target))) && !inside(next)) close();
  });

  window.addEventListener("resize", () => owner && place(owner));

  // ------------------------------------------------------------------ boxes that scroll sideways
  const TABLES = ".md-typeset .md-typeset__scrollwrap";
  const SCROLLERS = `${TABLES}, .md-typeset pre > code, .md-typeset .highlight-ipynb, .md-typeset .jp-OutputArea-output pre`;

  // a box's geometry, read apart from the writes (mark), so that marking every box of a page costs
  // one layout, not one per box
  function measure(box) {
    return { box, scrollWidth: box.scrollWidth, clientWidth: box.clientWidth, scrollLeft: box.scrollLeft };
  }

  // A scrolling table's name, unique on the page (several regions of one name are one landmark
  // to a screen reader): the heading it sits under, and a count where a heading has several.
  function regionLabel(box) {
    let heading = "";
    for (const h of document.querySelectorAll("article :is(h1, h2, h3, h4)")) {
      if (h.compareDocumentPosition(box) & Node.DOCUMENT_POSITION_FOLLOWING) heading = h.textContent.replace(/¶$/, "").trim();
      else break;
    }
    const base = heading ? `table under “${heading}”, scrolls sideways` : "table, scrolls sideways";
    const taken = new Set([...document.querySelectorAll("[role=region][aria-label]")].map((e) => e.getAttribute("aria-label")));
    let label = base;
    for (let n = 2; taken.has(label); n++) label = `${base} (${n})`;
    return label;
  }

  function mark(box, m = measure(box)) {
    const scrolls = m.scrollWidth > m.clientWidth + 1;
    box.classList.toggle("course-scrolls-left", scrolls && m.scrollLeft > 1);
    box.classList.toggle("course-scrolls-right", scrolls && m.scrollLeft + m.clientWidth < m.scrollWidth - 1);
    if (scrolls && !box.hasAttribute("tabindex")) {
      box.tabIndex = 0;
      box.dataset.courseScroll = "tabindex";
      if (box.matches(TABLES) && !box.hasAttribute("role")) {
        box.setAttribute("role", "region"); // what the focus names: "table, scrolls sideways"
        box.setAttribute("aria-label", regionLabel(box));
        box.dataset.courseScroll = "tabindex role";
      }
    } else if (!scrolls && box.dataset.courseScroll !== undefined) {
      box.removeAttribute("tabindex"); // only what this script set
      if (box.dataset.courseScroll.includes("role")) {
        box.removeAttribute("role");
        box.removeAttribute("aria-label");
      }
      delete box.dataset.courseScroll;
    }
  }

  function markAll() {
    const measured = [...document.querySelectorAll(SCROLLERS)].map(measure);
    measured.forEach((m) => mark(m.box, m));
  }

  // after the page's load event (a phone's load is not held up by a layout of every box)
  function afterLoad(fn) {
    if (document.readyState === "complete") fn();
    else window.addEventListener("load", () => fn(), { once: true });
  }

  document.addEventListener("scroll", (event) => event.target.matches?.(SCROLLERS) && mark(event.target), true);
  let pending = 0;
  window.addEventListener("resize", () => {
    clearTimeout(pending);
    pending = setTimeout(markAll, 150);
  });

  // ------------------------------------------------------------------ wide tables as cards
  // The scoreboard and the hardware sets' table become cards on a narrow screen (course.css): each
  // cell carries its column's name (data-label), and the table's parts keep their table roles, which
  // a browser drops from a table displayed as blocks.
  const CARD_TABLES = ".md-typeset table.scoreboard, .md-typeset .hardware-sets table";

  function asCards(table) {
    const heads = [...table.querySelectorAll("thead th")].map((th) => th.textContent.trim());
    table.setAttribute("role", "table");
    table.querySelectorAll("thead, tbody").forEach((g) => g.setAttribute("role", "rowgroup"));
    table.querySelectorAll("tr").forEach((tr) => tr.setAttribute("role", "row"));
    table.querySelectorAll("th").forEach((th) => th.setAttribute("role", "columnheader"));
    table.querySelectorAll("tbody tr").forEach((tr) => {
      [...tr.children].forEach((td, i) => {
        td.setAttribute("role", "cell");
        if (heads[i] && !td.hasAttribute("data-label")) td.setAttribute("data-label", heads[i]);
      });
    });
  }

  // Material labels a navigation section that has an index page by its expand button, which holds
  // only an icon: every such section would be a landmark without a name (one name for all of them).
  // Each takes its section's title instead.
  function nameSections() {
    document.querySelectorAll("nav.md-nav[aria-labelledby]").forEach((nav) => {
      const label = document.getElementById(nav.getAttribute("aria-labelledby"));
      const title = nav.querySelector(":scope > .md-nav__title");
      if (label && !label.textContent.trim() && title && title.textContent.trim()) {
        nav.setAttribute("aria-label", title.textContent.trim());
        nav.removeAttribute("aria-labelledby");
      }
    });
  }

  // Material puts each code block's copy button in a <nav> of its own, added when the block first
  // shows: a page of code blocks would have many navigation landmarks, none named. A copy button
  // is no navigation: the <nav> is given role="none" as it appears.
  const NOT_NAVIGATION = ".md-code__nav";
  function unlandmark(root) {
    if (root.matches?.(NOT_NAVIGATION)) root.setAttribute("role", "none");
    root.querySelectorAll?.(NOT_NAVIGATION).forEach((n) => n.setAttribute("role", "none"));
  }
  new MutationObserver((records) => {
    for (const r of records) {
      for (const n of r.addedNodes) if (n.nodeType === 1 && (n.matches(NOT_NAVIGATION) || n.classList.contains("highlight"))) unlandmark(n);
    }
  }).observe(document.body, { childList: true, subtree: true });

  function onPage() {
    close();
    nameSections();
    unlandmark(document.body);
    document.querySelectorAll(CARD_TABLES).forEach(asCards);
    // mdext writes each number as a control; one written by hand becomes one here
    document.querySelectorAll(NUMBERS).forEach((el) => {
      if (!el.hasAttribute("tabindex")) el.tabIndex = 0;
      if (!el.hasAttribute("role")) el.setAttribute("role", "button");
    });
    afterLoad(() => {
      markAll();
      setTimeout(markAll, 500); // after Material has wrapped the tables and the fonts have settled
    });
  }

  if (typeof document$ !== "undefined") document$.subscribe(onPage);
  else if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", onPage);
  else onPage();
})();
