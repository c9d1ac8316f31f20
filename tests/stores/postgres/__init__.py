"""Tests of the postgres backend."""
