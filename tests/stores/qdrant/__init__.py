"""Tests of the qdrant backend."""
