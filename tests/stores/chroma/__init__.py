"""Tests of the chroma backend."""
