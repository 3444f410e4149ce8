"""Layer 2, run: running a program under an injection library (finding libraries, environment,
timing). Imports only layers 0-1."""
