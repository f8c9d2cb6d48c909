"""noteloom: a local-first notes workspace with an AI layer built in."""

__version__ = "0.1.0"
