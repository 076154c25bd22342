"""Revision scripts, one per schema change."""
