"""Tests of the sqlite backend."""
