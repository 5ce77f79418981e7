"""Lowering: fusion groups -> kernel IR."""
