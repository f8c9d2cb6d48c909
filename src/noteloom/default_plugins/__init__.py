"""Plugins that ship with noteloom; they register through the same hooks as third-party ones."""
