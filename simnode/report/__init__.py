"""Results and their presentation: the typed result shape every kind produces
(``result``: header, kernel records, series, and the flat view derived from them), result
folders (``folder``), tables (``columns``), plots (``plots``) and the HTML page (``html``)."""
