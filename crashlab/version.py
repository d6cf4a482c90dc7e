"""crashlab's version, in a module of its own: every layer that stamps it on what it writes
imports it from here, never from the package it belongs to (which would import upward)."""

__version__ = "0.1.0"
