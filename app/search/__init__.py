"""The Search dock: the panel (`panel`), its strategy and budget controls (`controls`), the
best-so-far plot and candidates table (`views`) and the search run off the GUI thread
(`worker`)."""
