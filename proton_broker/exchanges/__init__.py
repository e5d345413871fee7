"""Exchanges, bindings and topic matching: the publish/subscribe domain (no Proton)."""
