"""Tests of the machinery itself (not the scenario suite)."""

pytest_plugins = ["pytester"]
