"""Chroma, read in attach mode only (`attach.py`): suture keeps no index of its own in it."""
