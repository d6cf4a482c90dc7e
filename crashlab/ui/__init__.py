"""``crashlab ui``: a read-only web view of the crash index for a fleet's on-call.

Werkzeug routes and serves it, Jinja2 renders it with autoescape on, so text from dumps and logs
is never markup; plots are inline SVG made here (charts.py), so a page needs no JavaScript and
fetches nothing. Both libraries are the ``[ui]`` extra: the core install stays without them.
"""
