"""The page machine behind the Markdown extension (coursekit/mdext.py), one module per concern:

- ``grammar``: the ``{{ ... }}`` grammar (placeholder, fences, value keys), standard library only;
- ``context``: the per-page state (``Page``) and the page on one hardware set (``PageContext``), the
  look-ups and the errors (``PlaceholderError``, ``MissingValue``);
- ``markup``: the HTML the kinds share (a measured number's span, provenance lines, links);
- one module per placeholder family: ``values`` (values, cited numbers), ``claims`` (asserts),
  ``figures`` (figures, and the figures.py call that computed values share), ``tables`` (outputs,
  provenance, hardware sets, scoreboard, reading time), ``chapter`` (the chapter box);
- ``kinds``: the registry ``KINDS`` of every kind by its first word;
- ``pagecache``: a filled page kept between builds, keyed by its text and what it reads.

Importing this package imports nothing but itself: ``coursekit.prose`` and ``coursekit.teaching``
read ``coursekit.page.grammar`` without Markdown or plotly.
"""
