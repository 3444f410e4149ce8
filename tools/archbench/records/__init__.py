"""Layer 1, records: reading and checking every file format archbench writes or reads, and the
results schema. Imports only archbench.cli (layer 0)."""
