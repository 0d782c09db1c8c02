"""Command-line front ends: parse arguments, call :mod:`cigri.api`, render, map errors to exit codes."""
