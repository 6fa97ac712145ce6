"""The pipeline graph: layered layout (`layout`), level-of-detail items (`items`), the view
that builds the scene (`view`), collapsible layer groups of large models (`groups`) and the
dock panel with find, fit and legend (`panel`)."""
