"""What the views show and change: the open `document`, the session's `history` of
variants, pure validated `edits`, the undoable `commands` built from them and `.sxproj`
`project` files."""
