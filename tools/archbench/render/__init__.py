"""Layer 4, render: charts (matplotlib, else plain SVG), HTML pages, markdown and terminal tables.
Imports only layers 0-3."""
